#pragma once
// What a training_step workload asks for: a model, a batch, and how it is laid
// out on a device mesh (README, "Training steps").
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tpsim/hw/dtype.hpp"
#include "tpsim/workload/model_shape.hpp"

namespace tpsim {

enum class MeshDim { tp, cp, ep, fsdp, dp, pp };
constexpr int kMeshDims = 6;
constexpr std::array<MeshDim, kMeshDims> kAllMeshDims = {MeshDim::tp, MeshDim::cp, MeshDim::ep, MeshDim::fsdp, MeshDim::dp, MeshDim::pp};
std::string_view mesh_dim_name(MeshDim d);
std::optional<MeshDim> parse_mesh_dim(std::string_view name);

struct MeshShape {
  std::array<int, kMeshDims> sizes{1, 1, 1, 1, 1, 1};
  std::vector<MeshDim> order = {MeshDim::tp, MeshDim::cp, MeshDim::ep, MeshDim::fsdp, MeshDim::dp, MeshDim::pp};  // inner to outer
  int size(MeshDim d) const { return sizes[static_cast<int>(d)]; }
  std::int64_t gpus() const;  // the product of the sizes; int64 max where that overflows
  // Rank distance between neighbours of a `d` group: the product of the dims inside it.
  std::int64_t stride(MeshDim d) const;
};

enum class Checkpointing { none, selective, full };
enum class PipelineSchedule { gpipe, one_f_one_b, interleaved_1f1b };
std::string_view checkpointing_name(Checkpointing c);
std::string_view pipeline_schedule_name(PipelineSchedule p);

struct TrainingStepSpec {
  ModelShape model;
  std::int64_t seq_len = 0;
  std::int64_t local_batch = 0;  // sequences per data-parallel (dp x fsdp) rank and step
  MeshShape mesh;
  Checkpointing checkpoint = Checkpointing::none;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int microbatches = 1;     // pipeline microbatches the local batch is cut into (1 without a pipeline)
  int virtual_stages = 1;   // model chunks per pipeline rank (interleaved 1F1B)
  Dtype grad_reduce_dtype = Dtype::fp32;  // FSDP2 / DDP gradient reduction (torchtitan's default: fp32)
  std::optional<Dtype> linear_dtype;      // fp8 linears (their GEMMs and scaling casts); else the scenario's dtype
  bool compile = false;                   // torch.compile: element-wise chains fused
  bool pipeline_settings_ignored = false; // microbatches or a schedule given without a pipeline

  std::int64_t microbatch_sequences() const { return local_batch / microbatches; }
  std::int64_t microbatch_tokens() const { return microbatch_sequences() * seq_len; }
  std::int64_t data_parallel() const { return static_cast<std::int64_t>(mesh.size(MeshDim::dp)) * mesh.size(MeshDim::fsdp); }
  std::int64_t global_tokens() const { return local_batch * seq_len * data_parallel(); }
  int chunks() const { return mesh.size(MeshDim::pp) * virtual_stages; }
};

}  // namespace tpsim

#include "tpsim/workload/training_spec.hpp"

#include <limits>

namespace tpsim {

std::string_view mesh_dim_name(MeshDim d) {
  switch (d) {
    case MeshDim::tp: return "tp";
    case MeshDim::cp: return "cp";
    case MeshDim::ep: return "ep";
    case MeshDim::fsdp: return "fsdp";
    case MeshDim::dp: return "dp";
    case MeshDim::pp: return "pp";
  }
  return "?";
}

std::optional<MeshDim> parse_mesh_dim(std::string_view name) {
  for (MeshDim d : kAllMeshDims)
    if (mesh_dim_name(d) == name) return d;
  return std::nullopt;
}

std::int64_t MeshShape::gpus() const {
  std::int64_t n = 1;
  for (int s : sizes)
    if (__builtin_mul_overflow(n, static_cast<std::int64_t>(s), &n)) return std::numeric_limits<std::int64_t>::max();
  return n;
}

std::int64_t MeshShape::stride(MeshDim d) const {
  std::int64_t s = 1;
  for (MeshDim inner : order) {
    if (inner == d) return s;
    s *= size(inner);
  }
  return s;
}

std::string_view checkpointing_name(Checkpointing c) {
  switch (c) {
    case Checkpointing::none: return "none";
    case Checkpointing::selective: return "selective";
    case Checkpointing::selective_op: return "selective_op";
    case Checkpointing::full: return "full";
  }
  return "?";
}

std::string_view pipeline_schedule_name(PipelineSchedule p) {
  switch (p) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved_1f1b: return "interleaved_1f1b";
    case PipelineSchedule::interleaved_zero_bubble: return "interleaved_zero_bubble";
    case PipelineSchedule::zbv_zero_bubble: return "zbv_zero_bubble";
    case PipelineSchedule::dualpipev: return "dualpipev";
  }
  return "?";
}

std::string_view attention_impl_name(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::flash: return "flash";
    case AttentionImpl::flash2: return "flash2";
    case AttentionImpl::cudnn: return "cudnn";
    case AttentionImpl::unfused: return "unfused";
  }
  return "flash";
}

AttentionKernel attention_kernel_of(AttentionImpl a) {
  return a == AttentionImpl::flash2 ? AttentionKernel::flash2 : a == AttentionImpl::cudnn ? AttentionKernel::cudnn : AttentionKernel::newest;
}

std::string_view cp_method_name(CpMethod m) { return m == CpMethod::allgather ? "allgather" : "ring"; }

}  // namespace tpsim

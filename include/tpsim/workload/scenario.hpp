#pragma once
// A scenario: which hardware, how many ranks, which dtype, which workload, and
// which variants (strategies) to simulate. Plain data: io/scenario.hpp parses it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpsim/dag/op.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/workload/model_shape.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

enum class Pass { forward, backward, forward_backward };

struct Workload {
  std::string op;  // a name from io/workload_kinds' table
  // matmul ops
  std::int64_t m = 0, k = 0;
  std::vector<std::int64_t> n;  // one weight, or (allgather_matmul) several sharing one gather: Q, K, V
  // A TP region's decomposition as one rank of a group of this size runs it, on one GPU that
  // plays every peer (its buffers local, its barriers over a group of one): what a one-GPU
  // emulation of PyTorch's async TP measures. 0: the group is the scenario's GPUs.
  int emulated_group = 0;
  // layer ops
  ModelShape model;
  std::int64_t tokens = 0;   // held by the TP group: local batch x sequence length
  std::int64_t seq_len = 0;
  Pass pass = Pass::forward;
  int layers = 1;
  std::optional<Dtype> linear_dtype;  // GEMMs of the linears, when not the scenario's dtype (fp8 training)
  bool compile = false;               // torch.compile: residual adds fused with the next norm, fp8 casts as Inductor generates them
  bool aten_elementwise = false;      // norms, RoPE and SiLU*mul as eager PyTorch's aten kernels (training steps' "elementwise")
  bool fused_norm = false;            // with it, the norms one fused kernel each way (training steps' "norm": "fused")
  bool aten_norm() const { return aten_elementwise && !fused_norm; }  // RMSNorm op by op
  bool torchtitan_model_code() const { return compile || aten_elementwise; }  // eager (aten) or compiled
  // The linears' weights arrive in linear_dtype (FSDP2's fp8 all-gather cast them): only
  // the activations and gradients are cast before the GEMMs.
  bool weights_in_linear_dtype = false;
  // The TP all-gathers carry linear_dtype (fp8 cast on the shard before the gather).
  bool tp_gathers_in_linear_dtype = false;
  Fp8Recipe fp8;  // how fp8 linears scale their operands (training steps' "fp8_recipe")
  // Sequence parallelism (Megatron-LM 2022): between TP regions each rank holds 1/G of the
  // tokens, regions all-gather and reduce-scatter. Without it every rank holds all tokens,
  // norms and residuals run replicated, and row-parallel outputs (forward) and
  // column-parallel input gradients (backward) are all-reduced.
  bool sequence_parallel = true;
  // What a column-parallel linear's weight gradient reads in backward under sequence
  // parallelism: its input gathered again (Megatron-LM), or the gathered input autograd
  // saved in forward (PyTorch's DTensor TP and async TP), with no all-gather.
  bool tp_saves_gathered_input = false;
  // Activations laid out [batch, sequence, hidden] with sequence parallelism sharding the
  // sequence, their second dimension (torchtitan's DTensor Shard(1)), rather than
  // [sequence, batch, hidden] (Megatron-LM): PyTorch's functional collectives then copy
  // the tensor into place around each all-gather and reduce-scatter (strategies/layer.cpp).
  bool batch_first = false;
  AttentionChoice attention;
  TrainingStepSpec step;  // training_step only
  std::int64_t n_total() const {
    std::int64_t t = 0;
    for (auto x : n) t += x;
    return t;
  }
};

// Which implementation of the software the scenario stands for, where it changed
// across releases (README, "software").
struct SoftwareChoices {
  // The sum that ends PyTorch's fused_matmul_reduce_scatter: torch.sum until
  // pytorch/pytorch PR 191803 (Aug 2026), a Triton kernel after it.
  ReductionKernel symm_mem_reduction = ReductionKernel::aten_sum;
  // How the host issues ops: from compiled code (each launch one call), eager PyTorch, or a CUDA graph.
  HostIssue op_issue = HostIssue::compiled;
  // Whether NCCL may use NVLink SHARP (NCCL_NVLS_ENABLE) where the hardware has it.
  bool nccl_nvls = true;
  // Whether NCCL may reduce in the network's switches (CollNet, NCCL_COLLNET_ENABLE with the
  // SHARP plugin) where the cluster has it; NCCL's default is off.
  bool nccl_collnet = false;
  // Async TP inside a layer where torch.compile's micro-pipeline TP pass decomposes it
  // (false), or in every TP region (true: what the pass does not do, as a what-if).
  bool async_tp_every_region = false;
  // Timed as a short benchmark after idle (tensor cores at the clock ceiling: power.burst_speed)
  // rather than in a sustained loop at the clock the power limit allows.
  bool burst_clock = false;
  // Every GEMM takes the plan predicted fastest (what an autotuner such as torch.compile's
  // max-autotune or XLA's would find) instead of the library's own split-K choice where the
  // hardware describes it (gemm.library_split: cuBLAS's, as eager PyTorch calls it).
  bool fastest_gemm = false;
  // The L2 the op's first kernel finds: as a benchmark loop leaves it (back to back), or after
  // the benchmark's flush before each timed call, read (clean) or overwritten (dirty).
  L2Start l2_start = L2Start::back_to_back;
};

// The hardware as the scenario's software runs it: NVLink SHARP off where NCCL may not use it,
// the switches' reductions on where it may and the cluster has them, the clock ceiling where
// the run is a burst and the model gives that speed, no library split rule where GEMMs are autotuned.
inline HardwareSpec run_by(HardwareSpec hw, const SoftwareChoices& sw) {
  if (!sw.nccl_nvls) hw.nccl.nvls = {};
  if (sw.fastest_gemm) hw.gemm.library_split = {};
  hw.cluster.sharp.enabled = sw.nccl_collnet && hw.cluster.sharp.available();
  hw.power.burst = sw.burst_clock && hw.power.burst_speed > 0;
  hw.memory.l2_start = sw.l2_start;
  return hw;
}

struct Scenario {
  std::string name;
  std::string hardware_ref;  // as written
  std::vector<std::string> notes;  // what was assumed, worth a line to the user (how GPUs map onto nodes)
  HardwareSpec hardware;
  int gpus = 0;
  Dtype dtype = Dtype::bf16;
  Workload workload;
  std::vector<std::string> variants;
  SoftwareChoices software;
  nlohmann::json workload_json;  // echoed into results
};

// Limits that keep a scenario physical and the simulation bounded.
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 24;
constexpr int kMaxGpus = 64;           // in one simulated TP group
constexpr int kMaxClusterGpus = 131072;  // in a training step's mesh (only the ranks that differ are simulated)
constexpr double kMaxStepTasks = 2e6;    // coarse tasks of a training step (all its simulated ranks)
constexpr int kMaxLayers = 1000;
// 2^36 elements (128 GiB at 2 bytes): no GPU holds a larger operand, and simulating
// GEMMs beyond it would take hours of block events.
constexpr double kMaxMatrixElements = 68719476736.0;

}  // namespace tpsim

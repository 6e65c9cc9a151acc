#pragma once
// torchtitan's per-op selective activation checkpointing, `"activation_checkpoint":
// "selective_op"` (torchtitan 9dec370, the version of its published H100 benchmarks:
// parallelisms/parallelize_llama.py, _apply_ac_to_transformer_block with
// selective_ac_option "op"). Each decoder layer runs under a policy that keeps the outputs of
// the ops in its _save_list: aten.mm (but the policy counts the layer's mm calls and
// recomputes every second one), SDPA's flash and efficient attention,
// _c10d_functional.reduce_scatter_tensor, and aten.abs / aten.max (fp8 amaxes).
// Everything else is run again ahead of the layer's backward: the norms, residual adds and
// SiLU*mul, TP's all-gathers and the recomputed linears. fp8 linears count alike: torchao's
// Float8Linear calls torch.mm on Float8Tensors (float8/float8_linear.py), so the policy's
// dispatch mode sees aten.mm before the tensor subclass turns it into _scaled_mm; a
// recomputed fp8 linear casts its operands again, one pass each (the amaxes are kept).
#include <cstdint>
#include <string>
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

// A decoder layer's linears in the order its forward calls them (wq, wk, wv, wo, w1, [w3,]
// w2), each as one TP rank multiplies it: [tokens, out] = [tokens, in] x [in, out].
struct LayerLinear {
  std::string name;
  std::int64_t out = 0, in = 0;  // on one TP rank
  bool row_parallel = false;     // output partial on every TP rank (wo, w2), reduce-scattered after
};
std::vector<LayerLinear> layer_linears(const ModelShape& m, int tp);

// Whether the policy keeps linear `index`'s output (0-based call order): the 1st, 3rd, 5th
// and 7th mm calls are kept, the 2nd, 4th and 6th recomputed.
bool op_policy_keeps(std::size_t index);

// Activation elements per token a layer keeps on one TP rank, times tp (the unit of
// activation_bytes_per_layer): the layer's input, the kept linears' outputs, the attention
// output and, with sequence parallelism, the reduce-scatters' outputs. (SDPA's
// log-sum-exp, one fp32 per head and token, is left out: under 1% of the rest.)
double op_checkpoint_kept_per_token(const TrainingStepSpec& t);

// One layer's recomputation under the policy, kernels back to back ahead of its backward
// (a dense layer with fused attention; MoE layers and unfused attention are refused by
// the loader), plus TP's all-gathers run again.
Tick op_checkpoint_recompute(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype);

}  // namespace tpsim

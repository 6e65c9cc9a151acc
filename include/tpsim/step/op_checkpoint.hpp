#pragma once
// torchtitan's per-op selective activation checkpointing, `"activation_checkpoint":
// "selective_op"`. Dense Llama layers follow torchtitan 9dec370, the version of its published
// H100 benchmarks (parallelisms/parallelize_llama.py, _apply_ac_to_transformer_block with
// selective_ac_option "op"); MoE and multi-head latent attention layers follow SelectiveAC of
// torchtitan b5bcd76 (distributed/activation_checkpoint.py), whose policy is the same for a
// dense layer. Each decoder layer runs under a policy that keeps the outputs of the ops on
// its save list: aten.mm (but the policy counts the layer's mm calls and recomputes every
// second one), SDPA, _c10d_functional.reduce_scatter_tensor and all_to_all_single (EP's
// dispatch and combine), topk, and aten.max (fp8 amaxes); the MoE router's gate is always
// recomputed and not counted (force_recompute_mm_shapes_by_fqns: "moe.router.gate"), and the
// routed experts' aten._grouped_mm is on neither list (PyTorch's compute_intensive_ops names
// mm, bmm, addmm, _scaled_mm and attention), so they run again. Everything else is run again
// ahead of the layer's backward: the norms, residual adds, SiLU*mul, RoPE, token permutations,
// TP's all-gathers and the recomputed linears. fp8 linears count alike: torchao's
// Float8Linear calls torch.mm on Float8Tensors (float8/float8_linear.py), so the policy's
// dispatch mode sees aten.mm before the tensor subclass turns it into _scaled_mm (PyTorch's
// Note [__torch_dispatch__ dispatching order], torch/csrc/utils/python_arg_parser.cpp: user
// modes before user subclasses, under torch.compile too), and compiled, the policy's tag goes
// to every graph node the op makes, the _scaled_mm among them (_CachingTorchDispatchMode,
// torch/utils/checkpoint.py); a recomputed fp8 linear casts its operands again, one pass
// each (the amaxes are kept).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

// A decoder layer's linears in the order its forward calls them, each as one TP rank
// multiplies it: [rows, out] = [rows, in] x [in, out].
struct LayerLinear {
  std::string name;
  std::int64_t out = 0, in = 0;  // on one TP rank
  bool row_parallel = false;     // output partial on every TP rank (wo, w2), reduce-scattered after
  // The tensor it multiplies: linears reading the same one share an fp8 cast of it. The
  // attention's and the FFN's "input" is the layer's, gathered over TP with sequence parallelism.
  std::string input;
  bool reads_gathered_input() const;
};
// A decoder layer's mm calls: the attention's (Llama's wq, wk, wv, wo; MLA's wq_a, wq_b (or one
// wq without a query latent), wkv_a, wkv_b, wo as torchtitan's deepseek_v3/model.py calls
// them), then the FFN's (the dense w1, [w3,] w2; a MoE layer's shared experts', none without
// them). The router's gate and the routed experts' grouped GEMMs are not aten.mm calls the
// policy counts.
std::vector<LayerLinear> block_linears(const ModelShape& m, int tp, bool moe);

// Whether the policy keeps linear `index`'s output (0-based call order): the odd-numbered
// mm calls (1st, 3rd, 5th ...) are kept, the even-numbered ones recomputed.
bool op_policy_keeps(std::size_t index);
// Whether linear `l` (call `index`) runs again ahead of the layer's backward: the policy drops
// its output, and it is needed. With sequence parallelism a row-parallel linear's output (wo's)
// goes only to a reduce-scatter whose output the policy keeps, so no recomputed op reads it:
// eager PyTorch reruns it on its way through the layer's forward, but compiled code's
// partitioner recomputes only what the backward graph needs (`reduce_scatter_kept`). Without
// one, the recomputed residual add reads it.
bool op_policy_reruns(const LayerLinear& l, std::size_t index, bool compiled, bool reduce_scatter_kept);

// Activation elements per token a layer keeps on one TP rank, times tp (the unit of
// activation_bytes_per_layer): the layer's input, the kept linears' outputs, the attention
// output, with sequence parallelism the reduce-scatters' outputs and, in a MoE layer under
// expert parallelism, the dispatch's and the combine's all-to-all outputs (top_k slots a
// token, more on the busiest rank). (SDPA's log-sum-exp, one fp32 per head and token, and
// topk's indices and scores are left out: under 1% of the rest.)
double op_checkpoint_kept_per_token(const TrainingStepSpec& t, bool moe);

// An all-gather of `tokens` x `in` (each TP rank holding 1/tp of the tokens) fused with the
// matmuls that read the gathered tensor (`outs`: their widths on one rank), in `dtype`, as
// PyTorch's async TP runs it.
using FusedGather = std::function<Tick(std::int64_t tokens, std::int64_t in, const std::vector<std::int64_t>& outs, Dtype dtype)>;

// One layer's recomputation under the policy, kernels back to back ahead of its backward
// (fused attention; unfused is refused by the loader), plus TP's all-gathers run again: NCCL's,
// or with `fused_gather` (async TP under torch.compile, whose micro-pipeline pass fuses a
// recomputed all-gather with the recomputed linears that read it) each fused with those
// linears. In a MoE layer this is the attention and the shared experts: the routed experts'
// recomputation (everything of their pass but its all-to-alls) comes from their own simulation.
Tick op_checkpoint_recompute(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool moe,
                             const FusedGather& fused_gather = {});

}  // namespace tpsim

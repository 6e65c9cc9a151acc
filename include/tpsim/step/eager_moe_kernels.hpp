#pragma once
// torchtitan's token-choice MoE as eager PyTorch runs it (`"elementwise": "aten"`), every aten
// op its own kernel, backward by autograd's formulas (tools/autograd/derivatives.yaml).
// Source: torchtitan 0cfbd0b (2025-10-02) models/moe.py (TokenChoiceTopKRouter,
// TokenReorderer, MoE.forward, _run_experts_grouped_mm) and distributed/expert_parallel.py
// (the expert_parallel wrapper around the experts), per layer and rank:
//   router: scores.to(float32), softmax, + expert_bias, topk, gather, * route_scale, histc
//     (twice), argsort(stable), the scores indexed into slot order, // top_k;
//   slots: torch.gather(x, 0, index expanded over the hidden dim), one row per slot;
//   around the experts: torch.vstack((x, a zero row)), x[permuted_indices] (into expert order,
//     padded), and after them out_unpermuted[permuted_indices] = out;
//   combine: routed_output.to(float32) * top_scores (score_before_experts false, as
//     DeepSeek-V3's args say), .to(bf16), then out.scatter_add(0, index, routed_output).
// Loops, from PyTorch's CUDA kernels of that autumn: gather with an expanded index copies
// whole rows with vectorized loads (pytorch PR 151490, IndexKernelUtils.cu
// vectorized_gather_kernel), and single-tensor indexing does the same (assumed from that PR;
// a profile of PyTorch 2.11 on an H100 shows x[perm] in vectorized_gather_kernel);
// index_put_ (gpu_index_kernel) and scatter_add (_scatter_gather_elementwise_kernel, an
// atomicAdd per element; its vectorized path, pytorch PR 182675, came in 2026) compute every
// element's offset in their own loops (ElementLoop index and scatter); the up-cast runs the
// cast loop; a broadcast product the legacy loop.
#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim {

// One rank's MoE layer: `tokens` it routes, `slots` = tokens x top_k it gathers and sums
// back, `computed` the slots its experts run (the busiest rank's paces the layer), `hidden`,
// `experts` (the router's columns), `local_experts` (the experts on this rank), activations of
// `e` bytes.
struct EagerMoeShape {
  double tokens = 0, slots = 0, computed = 0, hidden = 0, experts = 0, local_experts = 0, e = 2;
  // torchtitan's expert_parallel wrapper pads each local expert's rows to a multiple of 8
  // (TOKEN_GROUP_ALIGN_SIZE_M for bf16): the permuted rows, at most this many more.
  double padded() const;
};

// After the router's gate GEMM, before the dispatch: scores, top-k, the reorder and the
// gather of every slot's row. Backward: the same in reverse, after the dispatch's backward
// (the gate GEMM's gradients are the caller's).
NamedKernels eager_moe_route_kernels(const EagerMoeShape& s, bool backward);
// The expert_parallel wrapper's permutation into expert order before the experts; backward
// (after the experts'): the index's gradient, accumulated by index_put_ into zeros.
NamedKernels eager_moe_permute_kernels(const EagerMoeShape& s, bool backward);
// The wrapper's way back after the experts; backward (before the experts'): the slice's and
// the index_put_'s gradients.
NamedKernels eager_moe_unpermute_kernels(const EagerMoeShape& s, bool backward);
// After the combine: the scores applied in fp32 and the weighted sum into the shared
// experts' output; backward, before the combine's backward.
NamedKernels eager_moe_combine_kernels(const EagerMoeShape& s, bool backward);

}  // namespace tpsim

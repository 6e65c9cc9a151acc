#pragma once
// Attention without a fused kernel, as Megatron-LM's DotProductAttention runs it
// (megatron/core/transformer/dot_product_attention.py): the kernels one rank runs for
// its heads, in order. Forward: K and V repeated to the query heads (GQA), the scores
// Q K^T as a batched GEMM over sequences x heads (baddbmm), a fused scale-mask-softmax
// over the whole [s, s] scores (the causal mask is applied, nothing is skipped),
// dropout (output and a one-byte mask), the context P V (bmm), and its permute to
// [s, b, heads x head_dim]. Backward: the transposes, in autograd's order.
#include <string>
#include <utility>
#include <vector>

#include "tpsim/dag/op.hpp"

namespace tpsim {

// `a` is the problem the flash kernel would solve (its tokens, sequence length, heads and
// direction); `dropout` the attention dropout probability (0: no dropout kernels).
std::vector<std::pair<std::string, OpPayload>> unfused_attention_kernels(const AttentionOp& a, double dropout);

// Bytes one rank keeps per layer for the backward of the unfused core, for `score_elements`
// (sequences x heads x s x s) of `element_bytes` each: the softmax output, and with
// dropout its one-byte mask and its output (Korthikanti et al. 2022: 5as^2b at 2 bytes).
double unfused_attention_saved_bytes(double score_elements, double element_bytes, double dropout);

}  // namespace tpsim

#include "tpsim/strategies/unfused_attention.hpp"

namespace tpsim {

namespace {
double score_elements(const AttentionOp& a) {
  // tokens / seq_len sequences, each heads x [s, s]
  return static_cast<double>(a.tokens) * static_cast<double>(a.seq_len) * static_cast<double>(a.heads);
}
}  // namespace

std::vector<std::pair<std::string, OpPayload>> unfused_attention_kernels(const AttentionOp& a, double dropout) {
  const double e = dtype_bytes(a.dtype), scores = score_elements(a) * e, mask = score_elements(a);
  const std::int64_t batch = a.tokens / a.seq_len * a.heads, s = a.seq_len, d = a.head_dim;
  const double q_bytes = static_cast<double>(a.tokens) * static_cast<double>(a.heads * d) * e;
  const double kv_bytes = static_cast<double>(a.tokens) * static_cast<double>(a.kv_heads * d) * e;
  const bool repeat = a.heads > a.kv_heads;  // GQA: repeat_interleave copies K and V
  std::vector<std::pair<std::string, OpPayload>> k;
  if (!a.backward) {
    if (repeat) k.emplace_back("attention.kv_repeat", ElementwiseOp{2 * kv_bytes, 2 * q_bytes});
    k.emplace_back("attention.scores", GemmOp{{s, s, d, a.dtype, batch}});
    k.emplace_back("attention.softmax", ElementwiseOp{scores, scores});
    if (dropout > 0) k.emplace_back("attention.dropout", ElementwiseOp{scores, scores + mask});
    k.emplace_back("attention.context", GemmOp{{s, d, s, a.dtype, batch}});
    k.emplace_back("attention.context.permute", ElementwiseOp{q_bytes, q_bytes});
    return k;
  }
  k.emplace_back("attention.context.permute.backward", ElementwiseOp{q_bytes, q_bytes});
  // d(probs) = dC V^T; dV = probs^T dC
  k.emplace_back("attention.context.backward_probs", GemmOp{{s, s, d, a.dtype, batch}});
  k.emplace_back("attention.context.backward_values", GemmOp{{s, d, s, a.dtype, batch}});
  if (dropout > 0) k.emplace_back("attention.dropout.backward", ElementwiseOp{scores + mask, scores});
  k.emplace_back("attention.softmax.backward", ElementwiseOp{2 * scores, scores});
  // dQ = dS K; dK = dS^T Q
  k.emplace_back("attention.scores.backward_query", GemmOp{{s, d, s, a.dtype, batch}});
  k.emplace_back("attention.scores.backward_key", GemmOp{{s, d, s, a.dtype, batch}});
  // The repeated heads' gradients summed back onto the KV heads.
  if (repeat) k.emplace_back("attention.kv_repeat.backward", ElementwiseOp{2 * q_bytes, 2 * kv_bytes});
  return k;
}

double unfused_attention_saved_bytes(double score_elements, double element_bytes, double dropout) {
  return score_elements * (dropout > 0 ? 2 * element_bytes + 1 : element_bytes);
}

}  // namespace tpsim

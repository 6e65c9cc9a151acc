#include "tpsim/strategies/flash_attention.hpp"

namespace tpsim {

std::vector<std::pair<std::string, OpPayload>> flash_attention_kernels(const AttentionOp& a, const std::string& name) {
  if (!(a.flash2 && a.backward)) return {{name, a}};
  const double rows = static_cast<double>(a.tokens) * static_cast<double>(a.heads);  // one per token and query head
  const double e = dtype_bytes(a.dtype), fp32 = 4;
  const double out = rows * static_cast<double>(a.v_dim()) * e;               // O, and dO beside it
  const double dq_accum = rows * static_cast<double>(a.head_dim) * fp32;       // dQ accumulated in fp32
  return {{name + ".dot_do_o", ElementwiseOp{2 * out, rows * fp32 + dq_accum}},
          {name, a},
          {name + ".convert_dq", ElementwiseOp{dq_accum, rows * static_cast<double>(a.head_dim) * e}}};
}

}  // namespace tpsim

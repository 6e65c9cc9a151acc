#include "tpsim/strategies/flash_attention.hpp"

namespace tpsim {

std::vector<std::pair<std::string, OpPayload>> flash_attention_kernels(const AttentionOp& a, const std::string& name) {
  // FlashAttention-2's backward (run_flash_bwd_seqk_parallel) and cuDNN's alike run a dO.O
  // kernel before the main one and a dQ conversion after it (cudnn::fusion::
  // compute_dot_do_o_specialized and convert_dq_to_16bits, seen in PyTorch 2.11's profiles).
  if (a.kernel == AttentionKernel::newest || !a.backward) return {{name, a}};
  const double rows = static_cast<double>(a.tokens) * static_cast<double>(a.heads);  // one per token and query head
  const double e = dtype_bytes(a.dtype), fp32 = 4;
  const double out = rows * static_cast<double>(a.v_dim()) * e;               // O, and dO beside it
  const double dq_accum = rows * static_cast<double>(a.head_dim) * fp32;       // dQ accumulated in fp32
  return {{name + ".dot_do_o", ElementwiseOp{2 * out, rows * fp32 + dq_accum}},
          {name, a},
          {name + ".convert_dq", ElementwiseOp{dq_accum, rows * static_cast<double>(a.head_dim) * e}}};
}

}  // namespace tpsim

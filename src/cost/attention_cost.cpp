#include "tpsim/cost/attention_cost.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace tpsim {

std::string_view attention_kernel_name(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::newest: return "flash";
    case AttentionKernel::flash2: return "flash2";
    case AttentionKernel::cudnn: return "cudnn";
  }
  return "flash";
}

std::string missing_attention_kernel(const HardwareSpec& hw, AttentionKernel k) {
  if (hw.attention.has(k)) return "";
  const std::string key(attention_kernel_name(k));
  const std::string what = k == AttentionKernel::flash2 ? "FlashAttention-2" : "cuDNN attention";
  return fmt::format("hardware {} gives no {} efficiencies (attention.{}_forward_efficiency and {}_backward_efficiency)", hw.name, what,
                     key, key);
}

double attention_flops(const AttentionProblem& a) {
  // Q K^T over head_dim, then P V over the value width.
  const double fwd = 2.0 * static_cast<double>(a.tokens) * static_cast<double>(a.seq_len) *
                     static_cast<double>(a.head_dim + a.v_dim()) * static_cast<double>(a.heads) * (a.causal ? 0.5 : 1.0);
  return a.backward ? 2.5 * fwd : fwd;
}

double attention_bytes(const AttentionProblem& a) {
  const double e = dtype_bytes(a.dtype), tokens = static_cast<double>(a.tokens);
  const double qk = static_cast<double>(a.head_dim) * e, v = static_cast<double>(a.v_dim()) * e;
  const double q = tokens * a.heads * qk, k = tokens * a.kv_heads * qk, vv = tokens * a.kv_heads * v, o = tokens * a.heads * v;
  // forward: read Q, K, V, write O. backward: read Q, K, V, O, dO; write dQ, dK, dV.
  return a.backward ? 2 * q + 2 * k + 2 * vv + 2 * o : q + k + vv + o;
}

AttentionPlan plan_attention(const AttentionProblem& a, const HardwareSpec& hw) {
  AttentionPlan p;
  p.dtype = a.dtype;
  p.blocks = std::max<std::int64_t>(1, (a.tokens + hw.attention.block_rows - 1) / hw.attention.block_rows * a.heads);
  p.flops_per_block = attention_flops(a) / static_cast<double>(p.blocks);
  p.bytes_per_block = attention_bytes(a) / static_cast<double>(p.blocks);
  if (!hw.attention.has(a.kernel))
    throw std::logic_error("an attention kernel on hardware without its efficiencies (the scenario checks refuse it)");
  p.efficiency = hw.attention.efficiency(a.kernel, a.backward);
  if (a.kernel == AttentionKernel::flash2 && a.causal) {
    p.tiles_per_sequence = std::max<std::int64_t>(1, (a.seq_len + hw.attention.block_rows - 1) / hw.attention.block_rows);
    p.heavy_first = a.backward;
  }
  return p;
}

namespace {

BlockWork with_flops(const AttentionPlan& plan, double flops, const HardwareSpec& hw) {
  const Tick compute = duration_for(flops, hw.peak_flops_per_sm_per_ps(plan.dtype) * plan.efficiency);
  return BlockWork{.fixed = hw.gemm.block_prologue, .compute = compute, .bytes = plan.bytes_per_block,
                   .max_bytes_per_ps = hw.memory.sm_max_bytes_per_ps};
}

}  // namespace

BlockWork attention_block_work(const AttentionPlan& plan, const HardwareSpec& hw) {
  return with_flops(plan, plan.flops_per_block, hw);
}

BlockWork attention_block_work_at(const AttentionPlan& plan, std::int64_t block, const HardwareSpec& hw) {
  if (plan.tiles_per_sequence <= 0) return attention_block_work(plan, hw);
  const auto n = static_cast<double>(plan.tiles_per_sequence);
  const auto j = static_cast<double>(block % plan.tiles_per_sequence);
  const double share = plan.heavy_first ? 2 * (n - j) / (n + 1) : 2 * (j + 1) / (n + 1);
  return with_flops(plan, plan.flops_per_block * share, hw);
}

}  // namespace tpsim

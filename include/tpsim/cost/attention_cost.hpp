#pragma once
// Flash attention (FA2/FA3-style) on one rank's heads: blocks are 128-row query
// tiles per (sequence, head); each block's time comes from its share of the
// FLOPs at the measured fraction of tensor peak, or its share of the bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/hw/hbm_pool.hpp"

namespace tpsim {

std::string_view attention_kernel_name(AttentionKernel k);  // "flash", "flash2", "cudnn"
// Why `hw` cannot run kernel `k` ("" where it can): the efficiencies its file lacks.
std::string missing_attention_kernel(const HardwareSpec& hw, AttentionKernel k);

// One flash-attention call: this rank's heads (GQA: fewer KV heads) over its tokens.
struct AttentionProblem {
  std::int64_t tokens = 0, seq_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = true;
  bool backward = false;
  Dtype dtype = Dtype::bf16;
  AttentionKernel kernel = AttentionKernel::newest;
  // The value (and output) width per head where it differs from the query/key's (MLA:
  // 192-wide queries and keys, 128-wide values); 0: head_dim.
  std::int64_t v_head_dim = 0;
  std::int64_t v_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
};

struct AttentionPlan {
  Dtype dtype = Dtype::bf16;
  std::int64_t blocks = 0;
  double flops_per_block = 0;  // on average
  double bytes_per_block = 0;
  double efficiency = 0;
  // FlashAttention-2 with a causal mask: its tiles' work differs, in an order the launch grid
  // fixes (tiles_per_sequence > 0); otherwise every block does the average.
  std::int64_t tiles_per_sequence = 0;
  bool heavy_first = false;  // backward: key tiles, the first sees every query tile after it
};

// Matmul FLOPs: forward 2 x tokens x seq x (head_dim + v_dim) x heads (half when causal);
// backward 2.5x forward (five matmuls instead of two).
double attention_flops(const AttentionProblem& a);
// Q, K, V, O (+ dO, dQ, dK, dV backward) read or written once.
double attention_bytes(const AttentionProblem& a);
AttentionPlan plan_attention(const AttentionProblem& a, const HardwareSpec& hw);
BlockWork attention_block_work(const AttentionPlan& plan, const HardwareSpec& hw);
// Block `block` of the launch grid, in the order the hardware hands blocks out. FlashAttention-2
// launches grid (tiles, batch, heads), tiles fastest (flash_fwd_launch_template.h: grid(num_m_block,
// b, h); the backward's grid(num_n_block, b, h)): under a causal mask forward query tile j of n
// reads j + 1 key tiles, backward key tile j meets n - j query tiles, so work runs 2(j+1)/(n+1)
// (resp. 2(n-j)/(n+1)) times the average, light to heavy forward, heavy first backward.
BlockWork attention_block_work_at(const AttentionPlan& plan, std::int64_t block, const HardwareSpec& hw);

}  // namespace tpsim

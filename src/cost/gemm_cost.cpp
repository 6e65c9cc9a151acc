#include "tpsim/cost/gemm_cost.hpp"

#include <algorithm>

namespace tpsim {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

GemmPlan make_plan(const GemmProblem& p, const GemmTile& tile, int split_k) {
  GemmPlan plan;
  plan.dtype = p.dtype;
  plan.tile = tile;
  plan.split_k = split_k;
  plan.tiles = p.batch * ceil_div(p.m, tile.m) * ceil_div(p.n, tile.n);
  plan.blocks = plan.tiles * split_k;
  const std::int64_t k_slice = ceil_div(ceil_div(p.k, split_k), tile.k) * tile.k;
  plan.flops_per_block = 2.0 * tile.m * tile.n * static_cast<double>(k_slice);
  const double mn = static_cast<double>(p.batch) * static_cast<double>(p.m) * static_cast<double>(p.n);
  plan.hbm_bytes = dtype_bytes(p.dtype) * p.operand_elements();
  // Split-K writes fp32 partials and reads them back in the reduction.
  if (split_k > 1) plan.hbm_bytes += 2.0 * 4.0 * mn * split_k;
  plan.hbm_bytes_per_block = plan.hbm_bytes / static_cast<double>(plan.blocks);
  return plan;
}

}  // namespace

double tile_flops_per_ps(const GemmTile& tile, Dtype dtype, const HardwareSpec& hw) {
  const double issue_rate = hw.peak_flops_per_sm_per_ps(dtype) * tile.mainloop_efficiency;
  // Per K step the tile loads (m + n) x k operands for 2 x m x n x k FLOPs; the SM
  // cannot compute faster than L2 feeds it those operands.
  const double flops_per_byte = 2.0 * tile.m * tile.n / ((tile.m + tile.n) * dtype_bytes(dtype));
  return std::min(issue_rate, hw.gemm.l2_load_bytes_per_ps_per_sm * flops_per_byte);
}

BlockWork gemm_block_work(const GemmPlan& plan, const HardwareSpec& hw) {
  const double flops_rate = tile_flops_per_ps(plan.tile, plan.dtype, hw);
  // The K loop is pipelined: loads for stage i+1 overlap the MMAs of stage i, so
  // the block is bound by the slower of the two, plus its fixed prologue/epilogue.
  return BlockWork{.fixed = hw.gemm.block_prologue, .compute = duration_for(plan.flops_per_block, flops_rate),
                   .bytes = plan.hbm_bytes_per_block, .max_bytes_per_ps = hw.memory.sm_max_bytes_per_ps};
}

Tick gemm_block_time(const GemmPlan& plan, const HardwareSpec& hw, int memory_blocks_sharing, double hbm_bytes_per_ps) {
  return gemm_block_work(plan, hw).time_at(hbm_bytes_per_ps / std::max(1, memory_blocks_sharing));
}

Tick estimate_gemm_time(const GemmPlan& plan, const HardwareSpec& hw, int sms) {
  sms = std::max(1, sms);
  const std::int64_t waves = ceil_div(plan.blocks, sms);
  const int concurrent = static_cast<int>(std::min<std::int64_t>(plan.blocks, sms));
  return hw.gemm.kernel_ramp + waves * gemm_block_time(plan, hw, concurrent, hw.memory.hbm_bytes_per_ps);
}

GemmPlan plan_gemm(const GemmProblem& p, const HardwareSpec& hw) {
  if (const GroupedGemmSpec* grouped = p.grouped ? hw.gemm.grouped_for(p.dtype) : nullptr)
    // PyTorch's dispatch on the groups' shape (GroupMM.cu dispatch_bf16_grouped_kernel_on_tile_size,
    // ScaledGroupMM.cu dispatch_fp8_grouped_gemm_on_tile_size).
    return make_plan(p, grouped->tile_for(p.m, p.n, p.k), 1);
  GemmPlan best;
  Tick best_time = kTickMax;
  for (const GemmTile& tile : hw.gemm.tiles) {
    if (!tile.serves(p.dtype)) continue;
    for (int split = 1; split <= hw.gemm.max_split_k; ++split) {
      if (split > 1 && p.k / split < hw.gemm.min_split_k_depth) break;
      GemmPlan plan = make_plan(p, tile, split);
      // Split-K only pays when the tiles alone leave SMs idle.
      if (split > 1 && plan.tiles * (split - 1) >= hw.sm.count) break;
      const Tick t = estimate_gemm_time(plan, hw, hw.sm.count);
      if (t < best_time) best_time = t, best = plan;
    }
  }
  return best;
}

}  // namespace tpsim

#include "tpsim/cost/gemm_library_split.hpp"

#include <algorithm>

#include "tpsim/core/integer_division.hpp"

namespace tpsim {

bool library_splits_k(const GemmProblem& p, const HardwareSpec& hw) {
  const GemmLibrarySplitSpec& rule = hw.gemm.library_split;
  // Batched and grouped GEMMs' choices were not measured; custom kernels tile themselves.
  if (!rule.serves(p.dtype) || p.batch != 1 || p.grouped || !p.by_library) return false;
  const std::int64_t tiles = ceil_div(p.m, rule.reference_m) * ceil_div(p.n, rule.reference_n);
  return static_cast<double>(tiles) < hw.sm.count * (1.0 - rule.depth / static_cast<double>(p.k));
}

int library_split_slices(const GemmProblem& p, const GemmTile& tile, const HardwareSpec& hw) {
  const std::int64_t tiles = ceil_div(p.m, tile.m) * ceil_div(p.n, tile.n);
  const std::int64_t slices = std::min<std::int64_t>({hw.gemm.max_split_k, hw.sm.count / tiles, p.k / hw.gemm.library_split.min_slice});
  return static_cast<int>(std::max<std::int64_t>(slices, 1));
}

Tick library_rank_time(const GemmPlan& plan, const HardwareSpec& hw) {
  const std::int64_t waves = ceil_div(plan.blocks, hw.sm.count);
  const BlockWork w = gemm_block_work(plan, hw);
  return hw.gemm.kernel_ramp + waves * (w.fixed + w.compute) + (plan.split_k > 1 ? hw.elementwise.block_overhead : Tick{0});
}

}  // namespace tpsim

#include "tpsim/cost/gemm_cost.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "tpsim/core/integer_division.hpp"
#include "tpsim/cost/aten_rowwise_gemm.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/cost/gemm_library_split.hpp"

namespace tpsim {

namespace {

GemmPlan make_plan(const GemmProblem& p, const GemmTile& tile, int split_k, GemmProblem::Cluster cluster = {}) {
  GemmPlan plan;
  plan.cluster = cluster;
  const int cluster_m = cluster.given() ? cluster.m : 1, cluster_n = cluster.given() ? cluster.n : 1;
  plan.dtype = p.dtype;
  plan.slow_accumulation = p.dtype == Dtype::fp8 && !p.scaled_mm.fast_accumulation && !p.grouped;
  plan.tile = tile;
  plan.split_k = split_k;
  const auto k_slice = [&](std::int64_t k) { return ceil_div(ceil_div(k, split_k), tile.k) * tile.k; };
  double k_per_block = static_cast<double>(k_slice(p.k));
  if (p.ragged() && !p.ragged_k) {
    plan.tiles = 0;
    for (std::int64_t m : p.group_sizes) plan.tiles += ceil_div(m, tile.m) * ceil_div(p.n, tile.n);
  } else {
    // A cluster's padding CTAs (past C's edge) still run the main loop, on zero-filled operands.
    plan.tiles = p.batch * round_up(ceil_div(p.m, tile.m), cluster_m) * round_up(ceil_div(p.n, tile.n), cluster_n);
  }
  if (p.ragged() && p.ragged_k) {
    // Groups of unequal depth: every block is charged the mean padded depth, so the kernel's
    // work is conserved and the persistent grid spreads it evenly.
    double sum = 0;
    for (std::int64_t k : p.group_sizes) sum += static_cast<double>(k_slice(k));
    k_per_block = sum / static_cast<double>(p.group_sizes.size());
  }
  plan.blocks = plan.tiles * split_k;
  plan.flops_per_block = 2.0 * tile.m * tile.n * k_per_block;
  const double mn = p.ragged_k || !p.ragged() ? static_cast<double>(p.batch) * static_cast<double>(p.m) * static_cast<double>(p.n)
                                               : p.ragged_total() * static_cast<double>(p.n);
  plan.hbm_bytes = dtype_bytes(p.dtype) * p.operand_elements();
  if (split_k > 1) {
    // The GEMM writes fp32 partials where it would have written C; the reduction kernel
    // after it reads them and writes C.
    plan.reduction_read_bytes = 4.0 * mn * split_k;
    plan.reduction_written_bytes = dtype_bytes(p.dtype) * mn;
    plan.hbm_bytes += plan.reduction_read_bytes - plan.reduction_written_bytes;
  }
  plan.hbm_bytes_per_block = plan.hbm_bytes / static_cast<double>(plan.blocks);
  return plan;
}

}  // namespace

GemmProblem ragged_grouped_problem(const std::vector<std::int64_t>& sizes, std::int64_t m, std::int64_t n, std::int64_t k, Dtype dtype,
                                   bool ragged_k) {
  GemmProblem p{m, n, k, dtype, static_cast<std::int64_t>(sizes.size()), true};
  if (sizes.empty()) return p;
  const bool equal = std::all_of(sizes.begin(), sizes.end(), [&](std::int64_t s) { return s == sizes.front(); });
  (ragged_k ? p.k : p.m) = equal ? sizes.front() : std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) / p.batch;
  if (!equal) p.group_sizes = sizes, p.ragged_k = ragged_k;
  return p;
}

double tile_flops_per_ps(const GemmTile& tile, Dtype dtype, const HardwareSpec& hw, bool slow_accumulation) {
  const double issue_rate =
      hw.peak_flops_per_sm_per_ps(dtype) * tile.mainloop_efficiency * (slow_accumulation ? hw.gemm.slow_accumulation : 1.0);
  // Per K step the tile loads (m + n) x k operands for 2 x m x n x k FLOPs; the SM
  // cannot compute faster than L2 feeds it those operands.
  const double flops_per_byte = 2.0 * tile.m * tile.n / ((tile.m + tile.n) * dtype_bytes(dtype));
  return std::min(issue_rate, hw.gemm.l2_load_bytes_per_ps_per_sm * flops_per_byte);
}

BlockWork gemm_block_work(const GemmPlan& plan, const HardwareSpec& hw) {
  const double flops_rate = tile_flops_per_ps(plan.tile, plan.dtype, hw, plan.slow_accumulation);
  // The K loop is pipelined: loads for stage i+1 overlap the MMAs of stage i, so
  // the block is bound by the slower of the two, plus its fixed prologue/epilogue.
  return BlockWork{.fixed = hw.gemm.block_prologue, .compute = duration_for(plan.flops_per_block, flops_rate),
                   .bytes = plan.hbm_bytes_per_block, .max_bytes_per_ps = hw.memory.sm_max_bytes_per_ps};
}

Tick gemm_block_time(const GemmPlan& plan, const HardwareSpec& hw, int memory_blocks_sharing, double hbm_bytes_per_ps) {
  return gemm_block_work(plan, hw).shared_time(hbm_bytes_per_ps / std::max(1, memory_blocks_sharing));
}

Tick estimate_gemm_time(const GemmPlan& plan, const HardwareSpec& hw, int sms) {
  if (plan.resident_blocks > 0) sms = static_cast<int>(std::min<std::int64_t>(sms, plan.resident_blocks));
  sms = std::max(1, sms);
  const std::int64_t waves = ceil_div(plan.blocks, sms);
  const int concurrent = static_cast<int>(std::min<std::int64_t>(plan.blocks, sms));
  return hw.gemm.kernel_ramp + waves * gemm_block_time(plan, hw, concurrent, hw.memory.hbm_bytes_per_ps) +
         split_k_reduction_time(plan, hw);
}

Tick split_k_reduction_time(const GemmPlan& plan, const HardwareSpec& hw) {
  if (plan.split_k <= 1) return 0;
  // A grid-stride kernel: every block in one wave, sharing the HBM.
  const ElementwisePlan sum = plan_elementwise(plan.reduction_read_bytes + plan.reduction_written_bytes, hw);
  return hw.elementwise.block_overhead +
         elementwise_block_work(sum, hw).shared_time(hw.memory.hbm_bytes_per_ps / static_cast<double>(sum.blocks));
}

namespace {

// The tile a named plan gives, at its kernel family's rate.
GemmTile named_tile(const GemmProblem& p, const HardwareSpec& hw) {
  const GemmProblem::NamedPlan& n = p.named_plan;
  const GemmTile* family = nullptr;
  for (const GemmTile& tile : hw.gemm.tiles) {
    if (!tile.serves(p.dtype)) continue;
    if (tile.m == n.tile_m && tile.n == n.tile_n && tile.k == n.tile_k) return tile;
    if (!family) family = &tile;
  }
  if (!family) throw std::logic_error("no GEMM tile serves the dtype (the hardware loader requires one)");
  GemmTile t = *family;
  t.m = n.tile_m, t.n = n.tile_n, t.k = n.tile_k;
  return t;
}

}  // namespace

GemmPlan plan_gemm(const GemmProblem& p, const HardwareSpec& hw) {
  if (const GemmProblem::NamedPlan& n = p.named_plan; n.given()) {
    GemmPlan plan = make_plan(p, named_tile(p, hw), std::max(1, n.split_k), n.cluster);
    plan.resident_blocks = hw.sm.resident_cluster_ctas(n.cluster.ctas());
    return plan;
  }
  if (const GroupedGemmSpec* grouped = p.grouped ? hw.gemm.grouped_for(p.dtype) : nullptr)
    // PyTorch's dispatch on the groups' shape (GroupMM.cu dispatch_bf16_grouped_kernel_on_tile_size,
    // ScaledGroupMM.cu dispatch_fp8_grouped_gemm_on_tile_size).
    return make_plan(p, grouped->tile_for(p.m, p.n, p.k), 1);
  if (p.scaled_mm.aten_rowwise && hw.gemm.rowwise_scaled.serves(p.dtype)) {
    // Its grid over the output it computes (transposed or not), in whole clusters.
    const AtenRowwiseChoice c = aten_rowwise_choice(p.m, p.n, hw.sm.count);
    GemmProblem kernel = p;
    kernel.m = c.kernel_m, kernel.n = c.kernel_n;
    const RowwiseScaledGemmSpec& r = hw.gemm.rowwise_scaled;
    GemmPlan plan = make_plan(kernel, c.small_tile ? r.small_tile : r.large_tile, 1, c.cluster);
    plan.resident_blocks = hw.sm.resident_cluster_ctas(c.cluster.ctas());
    return plan;
  }
  if (p.scaled_mm.rowwise_scales && hw.gemm.library_rowwise.serves(p.dtype))
    // cuBLAS's outer-vector-scaled kernels: one tile, whole K (gemm.library_rowwise).
    return make_plan(p, hw.gemm.library_rowwise.tile, 1);
  GemmPlan best;
  Tick best_time = kTickMax;
  if (library_splits_k(p, hw)) {
    // The library's own split plan: each tile cut into a wave's worth of slices, ranked as the
    // library ranks them. Where it does not split, the fastest plan below stands in for its
    // choice (its clustered small-tile kernels are not modelled one by one).
    for (const GemmTile& tile : hw.gemm.tiles) {
      if (!tile.serves(p.dtype)) continue;
      const GemmPlan plan = make_plan(p, tile, library_split_slices(p, tile, hw));
      const Tick t = library_rank_time(plan, hw);
      if (t < best_time) best_time = t, best = plan;
    }
    best.library_split = true;
    return best;
  }
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

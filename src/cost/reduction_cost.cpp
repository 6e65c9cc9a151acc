#include "tpsim/cost/reduction_cost.hpp"

#include <algorithm>

namespace tpsim {

std::string_view reduction_kernel_name(ReductionKernel k) {
  switch (k) {
    case ReductionKernel::aten_sum: return "aten_sum";
    case ReductionKernel::triton: return "triton";
  }
  return "?";
}

std::optional<ReductionKernel> parse_reduction_kernel(std::string_view s) {
  if (s == "aten_sum") return ReductionKernel::aten_sum;
  if (s == "triton") return ReductionKernel::triton;
  return std::nullopt;
}

Tick reduction_block_time(const ElementwisePlan& plan, ReductionKernel kernel, const HardwareSpec& hw, int memory_blocks_sharing,
                          double hbm_bytes_per_ps) {
  const double per_block = static_cast<double>(hw.elementwise.blocks_per_sm);
  const double sm_rate = std::min(hw.reduction.sm_bytes_per_ps[static_cast<int>(kernel)], hw.memory.sm_max_bytes_per_ps);
  const double share = hbm_bytes_per_ps / std::max(1, memory_blocks_sharing);
  return hw.elementwise.block_overhead + duration_for(plan.bytes_per_block, std::min(sm_rate / per_block, share));
}

}  // namespace tpsim

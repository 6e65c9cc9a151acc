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

BlockWork reduction_block_work(const ElementwisePlan& plan, ReductionKernel kernel, const HardwareSpec& hw) {
  const double sm_rate = std::min(hw.reduction.sm_bytes_per_ps[static_cast<int>(kernel)], hw.memory.sm_max_bytes_per_ps);
  return BlockWork{.fixed = hw.elementwise.block_overhead, .bytes = plan.bytes_per_block,
                   .max_bytes_per_ps = sm_rate / hw.elementwise.blocks_per_sm};
}

}  // namespace tpsim

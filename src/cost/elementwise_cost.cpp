#include "tpsim/cost/elementwise_cost.hpp"

#include <algorithm>
#include <cmath>

namespace tpsim {

ElementwisePlan plan_elementwise(double bytes_moved, const HardwareSpec& hw) {
  ElementwisePlan plan;
  // Small tensors launch fewer blocks: at least 64 KiB of traffic per block.
  const double by_size = std::ceil(bytes_moved / 65536.0);
  plan.blocks = static_cast<std::int64_t>(
      std::clamp(by_size, 1.0, static_cast<double>(hw.sm.count) * hw.elementwise.blocks_per_sm));
  plan.bytes_per_block = bytes_moved / static_cast<double>(plan.blocks);
  return plan;
}

BlockWork elementwise_block_work(const ElementwisePlan& plan, const HardwareSpec& hw) {
  return BlockWork{.fixed = hw.elementwise.block_overhead, .bytes = plan.bytes_per_block,
                   .max_bytes_per_ps = hw.memory.sm_max_bytes_per_ps / hw.elementwise.blocks_per_sm};
}

}  // namespace tpsim

#include "tpsim/cost/elementwise_cost.hpp"

#include <algorithm>
#include <cmath>

namespace tpsim {

ElementwisePlan grid_stride_plan(double blocks_wanted, double bytes_moved, const HardwareSpec& hw) {
  ElementwisePlan plan;
  plan.blocks = static_cast<std::int64_t>(
      std::clamp(std::ceil(blocks_wanted), 1.0, static_cast<double>(hw.sm.count) * hw.elementwise.blocks_per_sm));
  plan.bytes_per_block = bytes_moved / static_cast<double>(plan.blocks);
  return plan;
}

ElementwisePlan plan_elementwise(double bytes_moved, const HardwareSpec& hw) {
  // Small tensors launch fewer blocks: each thread moves at least one 16-byte vector (ATen's
  // vectorized elementwise kernels: 128-bit loads), so a tensor of a few MiB already spans
  // every SM and takes HBM's rate, not a few SMs' (a 1 MiB copy runs at ~4 TB/s on an H200).
  constexpr double kVectorBytes = 16;
  return grid_stride_plan(bytes_moved / (kVectorBytes * hw.elementwise.block.threads), bytes_moved, hw);
}

BlockWork elementwise_block_work(const ElementwisePlan& plan, const HardwareSpec& hw) {
  // No prologue: its start-up (elementwise.block_overhead) is dead time before bytes flow, not
  // a prologue other blocks' streaming hides, so the launch charges it as the kernel's ramp.
  return BlockWork{.bytes = plan.bytes_per_block,
                   .max_bytes_per_ps = hw.memory.sm_max_bytes_per_ps / hw.elementwise.blocks_per_sm};
}

}  // namespace tpsim

#pragma once
// Memory-bound kernels (local copies, reductions, norms): a grid-stride kernel of
// SMs x blocks_per_sm blocks, each streaming its share of the bytes from HBM.
#include <cstdint>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/hw/hbm_pool.hpp"

namespace tpsim {

struct ElementwisePlan {
  std::int64_t blocks = 0;
  double bytes_per_block = 0;
};

// A grid-stride kernel's grid: `blocks_wanted` (one per unit of work it hands a block), at
// least one and at most elementwise.blocks_per_sm on every SM, `bytes_moved` spread evenly.
ElementwisePlan grid_stride_plan(double blocks_wanted, double bytes_moved, const HardwareSpec& hw);
ElementwisePlan plan_elementwise(double bytes_moved, const HardwareSpec& hw);
BlockWork elementwise_block_work(const ElementwisePlan& plan, const HardwareSpec& hw);

}  // namespace tpsim

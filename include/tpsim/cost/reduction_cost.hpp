#pragma once
// Reductions over stacked partials (the sum that ends a decomposed matmul ->
// reduce-scatter): a grid-stride kernel like the elementwise ones, but each SM
// can only process so many bytes per second, because the kernel's index math,
// conversions and fp32 adds, not HBM, may be what binds (ATen's reduce kernel
// over a short axis is instruction-bound: pytorch/pytorch PR 191803).
#include <optional>
#include <string_view>

#include "tpsim/core/tick.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

std::string_view reduction_kernel_name(ReductionKernel k);
std::optional<ReductionKernel> parse_reduction_kernel(std::string_view s);

// The grid of a sum of `partials` stacked inputs of `out_bytes` each: blocks are sized by
// the outputs they write (ATen's reduce kernel: 128 threads, 4 outputs a thread), so a
// small sum still spreads over every SM.
ElementwisePlan plan_reduction(int partials, double out_bytes, const HardwareSpec& hw);

// One block's work: its SM's instructions take the block's traffic at the kernel's rate per
// SM plus, where the kernel pays per output element, its output at the output rate, plus,
// where it loads the partials in rounds, its output at the round rate once per round (all
// shared by the blocks on the SM); the bytes stream from HBM meanwhile.
BlockWork reduction_block_work(const ElementwisePlan& plan, ReductionKernel kernel, int partials, const HardwareSpec& hw);

}  // namespace tpsim

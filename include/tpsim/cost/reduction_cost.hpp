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

// One block's work: its SM processes at most the kernel's rate per SM, shared by the blocks on it.
BlockWork reduction_block_work(const ElementwisePlan& plan, ReductionKernel kernel, const HardwareSpec& hw);

}  // namespace tpsim

#include "tpsim/cost/reduction_cost.hpp"

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

ElementwisePlan plan_reduction(int partials, double out_bytes, const HardwareSpec& hw) {
  constexpr double kOutputBytesPerBlock = 1024;  // 512 bf16 outputs: 128 threads x 4
  return grid_stride_plan(out_bytes / kOutputBytesPerBlock, (partials + 1) * out_bytes, hw);
}

BlockWork reduction_block_work(const ElementwisePlan& plan, ReductionKernel kernel, int partials, const HardwareSpec& hw) {
  const int k = static_cast<int>(kernel);
  const double share = 1.0 / hw.elementwise.blocks_per_sm;  // of its SM
  Tick compute = duration_for(plan.bytes_per_block, hw.reduction.sm_bytes_per_ps[k] * share);
  // Few partials: the per-output cost binds before the bytes do (ATen's sum of 2 partials
  // moves 1.5 TB/s on an H100, of 8 partials 2.9).
  const double out_bytes = plan.bytes_per_block / (partials + 1);
  if (hw.reduction.sm_output_bytes_per_ps[k] > 0) compute += duration_for(out_bytes, hw.reduction.sm_output_bytes_per_ps[k] * share);
  // ATen's reduce loads the partials of its outputs in rounds and waits on each: sums of 2,
  // 3 and 4 partials take one round, of 5 to 8 two (a staircase, not a slope).
  if (const int per_round = hw.reduction.loads_per_round[k]; per_round > 0) {
    const int rounds = (partials + per_round - 1) / per_round;
    compute += rounds * duration_for(out_bytes, hw.reduction.sm_round_output_bytes_per_ps[k] * share);
  }
  return BlockWork{.compute = compute,  // its start-up (reduction.block_overhead): charged per placement by the launch
                   .bytes = plan.bytes_per_block, .max_bytes_per_ps = hw.memory.sm_max_bytes_per_ps * share};
}

}  // namespace tpsim

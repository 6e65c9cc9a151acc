#include <string>

#include <fmt/format.h>

#include "hardware_quantities.hpp"
#include "tpsim/cost/reduction_cost.hpp"

namespace tpsim::hardware_file {

void parse_memory_bound_kernels(const ObjectReader& root, HardwareSpec& hw) {
  // A key older files carry: say what took its place rather than guess at a near name.
  if (root.has("elementwise") && root.at("elementwise").is_object() && root.at("elementwise").contains("strided_sm_rate"))
    fail_at("$.elementwise.strided_sm_rate",
            "replaced by strided_operand_rate (2-byte outputs) and strided_wide_operand_rate (wider ones): the legacy loop's rate per "
            "operand and element, so a kernel of k operands puts rate / k elements through (about 3x the old value for a product "
            "with a broadcast operand)");
  const ObjectReader ew = root.object("elementwise", {"threads", "registers_per_thread", "blocks_per_sm", "block_overhead",
                                                     "cast_sm_rate", "strided_operand_rate", "strided_wide_operand_rate", "strided_dimension_cost", "index_sm_rate",
                                                     "scatter_sm_rate", "cat_sm_rate", "row_reduction_sm_rate", "row_reduction_row_cost"});
  const Quantities eq(ew);
  hw.elementwise.block = {eq.count("threads"), eq.count("threads") * eq.count("registers_per_thread"), 0, 1};
  hw.elementwise.blocks_per_sm = eq.count("blocks_per_sm", 1024);
  hw.elementwise.block_overhead = eq.time("block_overhead");
  // Optional: where absent, ATen's unvectorized loops stream like vectorized ones.
  if (ew.has("cast_sm_rate")) hw.elementwise.cast_sm_elements_per_ps = eq.get("cast_sm_rate", "throughput");
  if (ew.has("strided_operand_rate")) hw.elementwise.strided_sm_operands_per_ps = eq.get("strided_operand_rate", "throughput");
  if (ew.has("strided_wide_operand_rate"))
    hw.elementwise.strided_wide_sm_operands_per_ps = eq.get("strided_wide_operand_rate", "throughput");
  if (ew.has("strided_dimension_cost")) hw.elementwise.strided_dimension_cost = eq.get("strided_dimension_cost", "fraction");
  if (ew.has("index_sm_rate")) hw.elementwise.index_sm_elements_per_ps = eq.get("index_sm_rate", "throughput");
  if (ew.has("scatter_sm_rate")) hw.elementwise.scatter_sm_elements_per_ps = eq.get("scatter_sm_rate", "throughput");
  if (ew.has("cat_sm_rate")) hw.elementwise.cat_sm_elements_per_ps = eq.get("cat_sm_rate", "throughput");
  // A row's fixed cost means nothing without the element rate, nor that rate without it.
  if (ew.has("row_reduction_sm_rate") != ew.has("row_reduction_row_cost"))
    fail_at(ew.path(), "needs both \"row_reduction_sm_rate\" and \"row_reduction_row_cost\", or neither");
  if (ew.has("row_reduction_sm_rate")) hw.elementwise.row_reduction_sm_elements_per_ps = eq.get("row_reduction_sm_rate", "throughput");
  if (ew.has("row_reduction_row_cost")) hw.elementwise.row_reduction_row_cost = eq.time("row_reduction_row_cost");

  const ObjectReader red = root.object("reduction", {"aten_sum", "triton"});
  for (ReductionKernel k : {ReductionKernel::aten_sum, ReductionKernel::triton}) {
    const std::string name(reduction_kernel_name(k));
    const ObjectReader kernel =
        red.object(name, {"sm_bandwidth", "sm_output_bandwidth", "sm_round_output_bandwidth", "loads_per_round", "block_overhead"});
    hw.reduction.sm_bytes_per_ps[static_cast<int>(k)] = Quantities(kernel).get("sm_bandwidth", "bandwidth");
    if (kernel.has("sm_output_bandwidth"))
      hw.reduction.sm_output_bytes_per_ps[static_cast<int>(k)] = Quantities(kernel).get("sm_output_bandwidth", "bandwidth");
    // A round's rate means nothing without the loads a round holds, nor those without the rate.
    if (kernel.has("sm_round_output_bandwidth") != kernel.has("loads_per_round"))
      fail_at(kernel.path(), "needs both \"sm_round_output_bandwidth\" and \"loads_per_round\", or neither");
    if (kernel.has("loads_per_round")) {
      hw.reduction.sm_round_output_bytes_per_ps[static_cast<int>(k)] =
          Quantities(kernel).get("sm_round_output_bandwidth", "bandwidth");
      hw.reduction.loads_per_round[static_cast<int>(k)] = Quantities(kernel).count("loads_per_round", 64);
    }
    hw.reduction.block_overhead[static_cast<int>(k)] =
        kernel.has("block_overhead") ? Quantities(kernel).time("block_overhead") : hw.elementwise.block_overhead;
  }
}

}  // namespace tpsim::hardware_file

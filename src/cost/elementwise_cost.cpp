#include "tpsim/cost/elementwise_cost.hpp"

#include <algorithm>
#include <cmath>

namespace tpsim {

std::string_view element_loop_name(ElementLoop l) {
  switch (l) {
    case ElementLoop::vectorized: return "vectorized";
    case ElementLoop::cast: return "cast";
    case ElementLoop::strided: return "strided";
    case ElementLoop::index: return "index";
    case ElementLoop::scatter: return "scatter";
    case ElementLoop::cat: return "cat";
    case ElementLoop::row_reduction: return "row_reduction";
  }
  return "vectorized";
}

std::optional<ElementLoop> parse_element_loop(std::string_view s) {
  for (ElementLoop l :
       {ElementLoop::vectorized, ElementLoop::cast, ElementLoop::strided, ElementLoop::index, ElementLoop::scatter, ElementLoop::cat,
        ElementLoop::row_reduction})
    if (element_loop_name(l) == s) return l;
  return std::nullopt;
}

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

double loop_sm_elements_per_ps(const LoopWork& w, const ElementwiseSpec& ew) {
  switch (w.loop) {
    case ElementLoop::vectorized: return 0.0;
    case ElementLoop::cast: return ew.cast_sm_elements_per_ps;
    case ElementLoop::strided: {
      // CUDALoops.cuh launch_legacy_kernel: 4 elements a thread below 4-byte outputs, else 2.
      const double rate = w.output_element_bytes >= 4 ? ew.strided_wide_sm_operands_per_ps : ew.strided_sm_operands_per_ps;
      // Each dimension past two adds a division and a multiply-add per operand to an offset.
      const double per_offset = 1 + ew.strided_dimension_cost * std::max(0, w.dims - 2);
      return rate / (std::max(2, w.operands) * per_offset);  // at least the output and one input
    }
    case ElementLoop::index: return ew.index_sm_elements_per_ps;
    case ElementLoop::scatter: return ew.scatter_sm_elements_per_ps;
    case ElementLoop::cat: return ew.cat_sm_elements_per_ps;
    case ElementLoop::row_reduction: {
      // Each element, and each row's share of its fixed cost: wide rows approach the element rate.
      if (ew.row_reduction_sm_elements_per_ps <= 0 || w.row <= 0) return 0.0;
      return 1.0 / (1.0 / ew.row_reduction_sm_elements_per_ps + static_cast<double>(ew.row_reduction_row_cost) / w.row);
    }
  }
  return 0.0;
}

BlockWork elementwise_block_work(const ElementwisePlan& plan, const HardwareSpec& hw, const LoopWork& w) {
  // No prologue: its start-up (elementwise.block_overhead) is dead time before bytes flow, not
  // a prologue other blocks' streaming hides, so the launch charges it to every placement of
  // the kernel's blocks (once where they go out together) and estimates add it once.
  double sm_bytes_per_ps = hw.memory.sm_max_bytes_per_ps;
  // An unvectorized loop's SM moves its bytes no faster than it gets through the elements.
  const double sm_elements_per_ps = loop_sm_elements_per_ps(w, hw.elementwise);
  // The SM's share of the elements goes with its share of the bytes (every block the same).
  const double blocks = static_cast<double>(plan.blocks);
  if (sm_elements_per_ps > 0 && w.elements > 0 && plan.bytes_per_block > 0)
    sm_bytes_per_ps = std::min(sm_bytes_per_ps, sm_elements_per_ps * plan.bytes_per_block * blocks / w.elements);
  return BlockWork{.bytes = plan.bytes_per_block, .max_bytes_per_ps = sm_bytes_per_ps / hw.elementwise.blocks_per_sm};
}

}  // namespace tpsim

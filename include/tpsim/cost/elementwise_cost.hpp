#pragma once
// Memory-bound kernels (local copies, reductions, norms): a grid-stride kernel of
// SMs x blocks_per_sm blocks, each streaming its share of the bytes from HBM.
#include <cstdint>
#include <optional>
#include <string_view>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/hw/hbm_pool.hpp"

namespace tpsim {

// How an ATen element-wise kernel walks its elements (aten/src/ATen/native/cuda/CUDALoops.cuh,
// gpu_kernel_impl): `vectorized` (contiguous, one dtype: 16-byte vector loads, bound by HBM),
// `cast` (contiguous but converting dtypes: the unrolled loop loads and stores each element
// through a runtime dtype switch), `strided` (a broadcast or permuted operand: the legacy loop
// computes each element's offsets). Three more of ATen's kernels compute an offset per element
// in their own loops: `index` (IndexKernel.cu's index_elementwise_kernel: index_put_, and an
// index where the vectorized row gather does not apply), `scatter` (ScatterGatherKernel.cu's
// _scatter_gather_elementwise_kernel: scatter_add_ and scatter, an atomic add per element for
// the former) and `cat` (Shape.cu's CatArrayBatchedCopy over inputs that are not contiguous:
// split views). `row_reduction`: a reduction over each row that Inductor writes as a looped
// Triton kernel (rows wider than its persistent threshold, 1,024 elements: choices.py's
// should_use_persistent_reduction), such as a compiled rowwise fp8 cast, which loops over the
// row for its amax, then again to scale and cast it: besides its elements, each row costs its
// SM a fixed time (the reduction across the block, the scale, the second loop's start).
// All but `vectorized` are bound by instructions per element.
enum class ElementLoop { vectorized, cast, strided, index, scatter, cat, row_reduction };
std::string_view element_loop_name(ElementLoop l);
std::optional<ElementLoop> parse_element_loop(std::string_view s);

struct ElementwisePlan {
  std::int64_t blocks = 0;
  double bytes_per_block = 0;
};

// A grid-stride kernel's grid: `blocks_wanted` (one per unit of work it hands a block), at
// least one and at most elementwise.blocks_per_sm on every SM, `bytes_moved` spread evenly.
ElementwisePlan grid_stride_plan(double blocks_wanted, double bytes_moved, const HardwareSpec& hw);
ElementwisePlan plan_elementwise(double bytes_moved, const HardwareSpec& hw);
// An unvectorized loop's output: its elements, the tensors whose offsets a `strided` loop
// computes per element, the output's element size (the legacy loop's unroll follows it).
struct LoopWork {
  ElementLoop loop = ElementLoop::vectorized;
  double elements = 0;
  int operands = 0;
  double output_element_bytes = 0;
  int dims = 2;  // the strided loop's dimensions after merging
  double row = 0;  // a row reduction's row: the elements each of its rows holds
};
// Elements one SM puts through the loop per ps; 0: streams (vectorized, or a loop with no rate).
double loop_sm_elements_per_ps(const LoopWork& w, const ElementwiseSpec& ew);
// One block's work. An ATen loop other than the vectorized one also caps its SM's rate at what
// its instructions per element allow (loop_sm_elements_per_ps).
BlockWork elementwise_block_work(const ElementwisePlan& plan, const HardwareSpec& hw, const LoopWork& w = {});

}  // namespace tpsim

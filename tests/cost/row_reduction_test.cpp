// Inductor's looped row reductions (a compiled rowwise fp8 cast over rows wider than 1,024):
// bound by the SM's instructions per element and per row, not by HBM
// (models/measurements/h100_sxm_fp8_row_casts.json, h200_fp8_row_casts.json).
#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/strategies/eager_kernels.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

constexpr double kElements = 65536.0 * 4096, kBf16 = 2, kFp8 = 1;

// A compiled rowwise cast of kElements bf16 values along rows of `row`.
double cast_us(double row, const HardwareSpec& hw = h100()) {
  return kernel_alone_us(compiled_row_cast(kElements, row, kBf16, kFp8), hw);
}

}  // namespace

TEST_CASE("A looped row reduction pays per row: the same elements in wider rows take less time, down to the element rate",
          "[cost][elementwise]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.elementwise.row_reduction_sm_elements_per_ps > 0);
  REQUIRE(hw.elementwise.row_reduction_row_cost > 0);
  const double overhead_us = to_us(hw.elementwise.block_overhead);
  // Fewer, wider rows: each row's fixed cost is paid fewer times.
  double previous = cast_us(1792);
  for (double row : {4096.0, 8192.0, 14336.0, 65536.0}) {
    const double us = cast_us(row);
    CHECK(us < previous);
    previous = us;
  }
  // Past the fixed costs, the elements at the SM rate; halving the rows' count halves what they add.
  const double elements_us = kElements / (hw.elementwise.row_reduction_sm_elements_per_ps * hw.sm.count) / 1e6;
  const auto rows_us = [&](double row) { return cast_us(row) - overhead_us - elements_us; };
  CHECK(rows_us(4096) == Approx(2 * rows_us(8192)).epsilon(0.03));
  CHECK(rows_us(4096) == Approx(kElements / 4096 * to_us(hw.elementwise.row_reduction_row_cost) / hw.sm.count).epsilon(0.03));
}

TEST_CASE("A looped row reduction is bound per SM: faster HBM leaves it as it was, and it never beats streaming its bytes",
          "[cost][elementwise]") {
  const HardwareSpec& hw = h100();
  HardwareSpec fast_hbm = hw;  // an H200's HBM on an H100's SMs
  fast_hbm.memory.hbm_bytes_per_ps *= 1.43;
  fast_hbm.memory.sm_max_bytes_per_ps *= 1.43;
  const ElementwiseOp streamed{kElements * kBf16, kElements * kFp8};
  for (double row : {1792.0, 4096.0, 8192.0}) {
    INFO(row);
    CHECK(cast_us(row, fast_hbm) == Approx(cast_us(row)).epsilon(0.01));
  }
  // At 14,336 the H100's HBM nearly binds as well (measured: 1.03-1.05x the H200's time).
  CHECK(cast_us(14336, fast_hbm) <= cast_us(14336));
  CHECK(cast_us(14336, fast_hbm) > 0.95 * cast_us(14336));
  for (double row : {1792.0, 14336.0, 1e6}) CHECK(cast_us(row) >= kernel_alone_us(streamed) * 0.999);
  CHECK(kernel_alone_us(streamed, fast_hbm) < 0.8 * kernel_alone_us(streamed));
}

TEST_CASE("Rows up to Inductor's persistent threshold stream, wider ones loop, and the bytes are the cast's", "[cost][elementwise]") {
  const ElementwiseOp persistent = compiled_row_cast(kElements, 1024, kBf16, kFp8);
  const ElementwiseOp looped = compiled_row_cast(kElements, 1025, kBf16, kFp8);
  CHECK(persistent.loop == ElementLoop::vectorized);
  CHECK(looped.loop == ElementLoop::row_reduction);
  CHECK(looped.row == 1025);
  CHECK(looped.elements == kElements);
  // Read once, written in fp8 with one fp32 scale a row.
  CHECK(persistent.bytes_read == kElements * kBf16);
  CHECK(persistent.bytes_written == Approx(kElements * kFp8 + kElements / 1024 * 4));
  // A hardware file without the two parameters streams the looped kernel too.
  HardwareSpec unrated = h100();
  unrated.elementwise.row_reduction_sm_elements_per_ps = 0;
  CHECK(loop_sm_elements_per_ps({ElementLoop::row_reduction, kElements, 0, 1, 2, 4096}, unrated.elementwise) == 0);
  CHECK(kernel_alone_us(looped, unrated) == Approx(kernel_alone_us(ElementwiseOp{looped.bytes_read, looped.bytes_written})).epsilon(1e-9));
  CHECK(parse_element_loop(element_loop_name(ElementLoop::row_reduction)) == ElementLoop::row_reduction);
}

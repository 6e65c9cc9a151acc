#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/cost/reduction_cost.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

ElementwiseOp copy_of(double bytes) { return ElementwiseOp{bytes, bytes}; }

constexpr double kMiB = 1024.0 * 1024;

}  // namespace

TEST_CASE("An elementwise kernel is HBM-bound: half the bandwidth, twice the time", "[cost][elementwise]") {
  HardwareSpec slow = h100();
  slow.memory.hbm_bytes_per_ps /= 2;
  const auto plan = plan_elementwise(1e9, h100());
  const int all = static_cast<int>(plan.blocks);
  // A block's work is its bytes alone: the kernel's start-up is charged at launch, as its ramp.
  const Tick fast_t = elementwise_block_work(plan, h100()).time_at(h100().memory.hbm_bytes_per_ps / all);
  const Tick slow_t = elementwise_block_work(plan, slow).time_at(slow.memory.hbm_bytes_per_ps / all);
  CHECK(static_cast<double>(slow_t) / static_cast<double>(fast_t) == Approx(2.0).epsilon(0.001));
  // 1 GB moved at ~3 TB/s: about 333 us end to end on the whole GPU.
  Dag dag(1);
  const OpId id = dag.add(0, 0, "copy", ElementwiseOp{0.5e9, 0.5e9});
  CHECK(op_us(execute(dag, h100()), id) == Approx(1e9 / h100().memory.hbm_bytes_per_ps / 1e6).epsilon(0.05));
}

TEST_CASE("A copy takes its start-up plus its bytes at HBM's rate: beyond the start-up, twice the bytes take twice the time",
          "[cost][elementwise]") {
  const HardwareSpec hw = h100();
  const double start = to_us(hw.elementwise.block_overhead);
  REQUIRE(start > 0);
  // A tiny copy is all start-up.
  CHECK(kernel_alone_us(copy_of(64)) == Approx(start).epsilon(0.05));
  for (double mib : {1.0, 4.0, 16.0}) {
    const double one = kernel_alone_us(copy_of(mib * kMiB)) - start;
    const double two = kernel_alone_us(copy_of(2 * mib * kMiB)) - start;
    INFO(mib << " MiB: " << one << " us beyond the start-up, twice the bytes " << two);
    CHECK(two / one == Approx(2.0).epsilon(0.03));
    // ... at the whole HBM's rate, not a few SMs': the grid spans every SM from 1 MiB up.
    const double hbm_us = 2 * mib * kMiB / (hw.memory.hbm_bytes_per_ps * 1e6);
    CHECK(one == Approx(hbm_us).epsilon(0.03));
  }
}

TEST_CASE("A small tensor still spreads over every SM: the grid grows with the bytes until each SM has its blocks",
          "[cost][elementwise]") {
  const HardwareSpec hw = h100();
  const std::int64_t full = static_cast<std::int64_t>(hw.sm.count) * hw.elementwise.blocks_per_sm;
  CHECK(plan_elementwise(16, hw).blocks == 1);
  const ElementwisePlan quarter = plan_elementwise(0.5 * kMiB, hw);
  CHECK(quarter.blocks > 1);
  CHECK(quarter.blocks <= full);
  CHECK(plan_elementwise(4 * kMiB, hw).blocks == full);
  // Bytes are conserved across the blocks.
  CHECK(quarter.bytes_per_block * static_cast<double>(quarter.blocks) == Approx(0.5 * kMiB));
}

TEST_CASE("More start-up costs a small copy that much and a large one almost nothing", "[cost][elementwise]") {
  HardwareSpec slow = h100();
  slow.elementwise.block_overhead += ticks_from_us(1.0);
  const double small = kernel_alone_us(copy_of(kMiB), slow) - kernel_alone_us(copy_of(kMiB));
  const double large = kernel_alone_us(copy_of(1024 * kMiB), slow) - kernel_alone_us(copy_of(1024 * kMiB));
  CHECK(small == Approx(1.0).epsilon(0.02));
  CHECK(large == Approx(1.0).epsilon(0.02));
  CHECK(large / kernel_alone_us(copy_of(1024 * kMiB)) < 0.002);
}

TEST_CASE("ATen's sum has a start-up of its own: summing a few KiB takes longer than copying them", "[cost][reduction]") {
  const HardwareSpec hw = h100();
  const double sum = kernel_alone_us(ReduceOp{2, 4096, ReductionKernel::aten_sum});
  const double copy = kernel_alone_us(ElementwiseOp{8192, 4096});
  const double start = to_us(hw.reduction.block_overhead[static_cast<int>(ReductionKernel::aten_sum)]);
  CHECK(sum >= start);
  CHECK(sum < start + 1.0);  // the rest: its per-output work on 4 KiB
  CHECK(sum > copy + 1.0);
  // Triton's kernel, with no start-up of its own given, starts like a streaming kernel.
  CHECK(to_us(hw.reduction.block_overhead[static_cast<int>(ReductionKernel::triton)]) == Approx(to_us(hw.elementwise.block_overhead)));
}

TEST_CASE("ATen's unvectorized loops are bound by elements, not bytes: faster HBM does not speed them up", "[cost][elementwise]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.elementwise.cast_sm_elements_per_ps > 0);
  REQUIRE(hw.elementwise.strided_sm_operands_per_ps > 0);
  const double n = 64 * kMiB;  // a bf16 -> fp32 up-cast of n elements: 2n read, 4n written
  const ElementwiseOp cast{2 * n, 4 * n, n, ElementLoop::cast}, vectorized{2 * n, 4 * n};
  const double cast_us = kernel_alone_us(cast), vector_us = kernel_alone_us(vectorized);
  // The same bytes through the cast loop take longer than streamed, and as long as its elements
  // take at the SM rate (start-up aside).
  CHECK(cast_us > 1.2 * vector_us);
  const double elements_us = n / (hw.elementwise.cast_sm_elements_per_ps * hw.sm.count) / 1e6;
  CHECK(cast_us - to_us(hw.elementwise.block_overhead) == Approx(elements_us).epsilon(0.03));
  // 1.5x the HBM: the streamed copy gets faster, the cast loop does not (an H100 against an H200).
  HardwareSpec fast_hbm = hw;
  fast_hbm.memory.hbm_bytes_per_ps *= 1.5;
  fast_hbm.memory.sm_max_bytes_per_ps *= 1.5;
  CHECK(kernel_alone_us(vectorized, fast_hbm) < 0.75 * vector_us);
  CHECK(kernel_alone_us(cast, fast_hbm) == Approx(cast_us).epsilon(0.01));
  // Bound by elements: fewer bytes per element (a bf16 -> fp16 cast, say) take the same time...
  CHECK(kernel_alone_us(ElementwiseOp{2 * n, 2 * n, n, ElementLoop::cast}) == Approx(cast_us).epsilon(0.02));
  // ...until HBM binds first: a strided kernel never beats the streamed one of its bytes.
  const ElementwiseOp wide{64 * n, 64 * n, n, ElementLoop::strided, 3};
  CHECK(kernel_alone_us(wide) >= kernel_alone_us(ElementwiseOp{64 * n, 64 * n}) * 0.999);
  // Without the rates (a hardware file that gives none) the loops stream like vectorized kernels.
  HardwareSpec unrated = hw;
  unrated.elementwise.cast_sm_elements_per_ps = unrated.elementwise.strided_sm_operands_per_ps = 0;
  CHECK(kernel_alone_us(cast, unrated) == Approx(vector_us).epsilon(1e-9));
}

TEST_CASE("ATen's legacy strided loop pays per operand: a third operand costs half again, a fourth a third again", "[cost][elementwise]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.elementwise.strided_sm_operands_per_ps > 0);
  REQUIRE(hw.elementwise.strided_wide_sm_operands_per_ps > 0);
  const double n = 64 * kMiB, overhead_us = to_us(hw.elementwise.block_overhead);
  for (double e : {2.0, 4.0}) {
    // Few bytes per element, so the instructions bind: an expanded copy (2 operands), a product
    // with a broadcast operand (3), addcmul with one (4), all writing n elements of e bytes.
    const auto us = [&](int operands) { return kernel_alone_us(ElementwiseOp{e * n / 4, e * n, n, ElementLoop::strided, operands}) - overhead_us; };
    CHECK(us(3) == Approx(1.5 * us(2)).epsilon(0.01));
    CHECK(us(4) == Approx(4.0 / 3 * us(3)).epsilon(0.01));
    // The rate the hardware file gives, shared by the operands.
    const double rate = e >= 4 ? hw.elementwise.strided_wide_sm_operands_per_ps : hw.elementwise.strided_sm_operands_per_ps;
    CHECK(us(3) == Approx(3 * n / (rate * hw.sm.count) / 1e6).epsilon(0.02));
  }
  // Wider outputs unroll less (2 elements a thread, not 4): on an H100 they get through fewer operands.
  CHECK(hw.elementwise.strided_wide_sm_operands_per_ps < hw.elementwise.strided_sm_operands_per_ps);
  // The rate follows the output's element size, whatever the inputs read.
  CHECK(loop_sm_elements_per_ps({ElementLoop::strided, n, 3, 4}, hw.elementwise) ==
        Approx(hw.elementwise.strided_wide_sm_operands_per_ps / 3));
  CHECK(loop_sm_elements_per_ps({ElementLoop::strided, n, 3, 2}, hw.elementwise) == Approx(hw.elementwise.strided_sm_operands_per_ps / 3));
}

TEST_CASE("Each dimension the strided loop's offset calculator keeps past two costs the same share more", "[cost][elementwise]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.elementwise.strided_dimension_cost > 0);
  const double n = 64 * kMiB, overhead_us = to_us(hw.elementwise.block_overhead);
  // repeat_kv's expand copy: 2 operands, bf16, a quarter of the bytes read.
  const auto us = [&](int dims) {
    ElementwiseOp copy{n / 2, 2 * n, n, ElementLoop::strided, 2};
    copy.dims = dims;
    return kernel_alone_us(copy) - overhead_us;
  };
  const double c = hw.elementwise.strided_dimension_cost;
  CHECK(us(3) == Approx((1 + c) * us(2)).epsilon(0.01));
  CHECK(us(5) - us(4) == Approx(us(4) - us(3)).epsilon(0.02));  // linear in the dimensions
  CHECK(us(1) == Approx(us(2)).epsilon(1e-9));                     // one dimension costs what two do
  // A streamed copy does not care how its input was laid out.
  ElementwiseOp streamed{n / 2, 2 * n};
  streamed.dims = 5;
  CHECK(kernel_alone_us(streamed) == Approx(kernel_alone_us(ElementwiseOp{n / 2, 2 * n})).epsilon(1e-9));
}

TEST_CASE("ATen's index, scatter and cat kernels take time in proportion to their elements at their own rates", "[cost][elementwise]") {
  const HardwareSpec& hw = h100();
  const double n = 64 * kMiB, overhead_us = to_us(hw.elementwise.block_overhead);
  for (ElementLoop loop : {ElementLoop::index, ElementLoop::scatter, ElementLoop::cat}) {
    INFO(element_loop_name(loop));
    const double rate = loop_sm_elements_per_ps({loop, n}, hw.elementwise);
    REQUIRE(rate > 0);
    // bf16 rows moved by index: 2 bytes read and written an element, far below HBM's rate.
    const ElementwiseOp op{2 * n, 2 * n, n, loop};
    const double us = kernel_alone_us(op);
    CHECK(us - overhead_us == Approx(n / (rate * hw.sm.count) / 1e6).epsilon(0.03));
    // A staircase of one step: twice the elements, twice the time past the start-up.
    CHECK(kernel_alone_us(ElementwiseOp{4 * n, 4 * n, 2 * n, loop}) - overhead_us == Approx(2 * (us - overhead_us)).epsilon(0.02));
    // Bound by instructions: the same kernel streamed would be faster.
    CHECK(us > 1.3 * kernel_alone_us(ElementwiseOp{2 * n, 2 * n}));
    // parse and print agree
    CHECK(parse_element_loop(element_loop_name(loop)) == loop);
  }
  // A hardware file without these rates streams them as vectorized kernels.
  HardwareSpec unrated = hw;
  unrated.elementwise.index_sm_elements_per_ps = unrated.elementwise.scatter_sm_elements_per_ps = 0;
  unrated.elementwise.cat_sm_elements_per_ps = 0;
  for (ElementLoop loop : {ElementLoop::index, ElementLoop::scatter, ElementLoop::cat}) {
    CHECK(loop_sm_elements_per_ps({loop, n}, unrated.elementwise) == 0);
    CHECK(kernel_alone_us(ElementwiseOp{2 * n, 2 * n, n, loop}, unrated) == Approx(kernel_alone_us(ElementwiseOp{2 * n, 2 * n})).epsilon(1e-9));
  }
  CHECK(loop_sm_elements_per_ps({ElementLoop::vectorized, n}, hw.elementwise) == 0);
  CHECK_FALSE(parse_element_loop("gather").has_value());
}

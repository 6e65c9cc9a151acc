#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/reduction_cost.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

// One kernel alone on one GPU: its device time in microseconds.
double alone_us(OpPayload payload, const HardwareSpec& hw = h100()) {
  Dag dag(1);
  const OpId id = dag.add(0, 0, "kernel", std::move(payload));
  return op_us(execute(dag, hw), id);
}

// The sum that ends an 8-rank reduce-scatter of a 16 MiB chunk: 8 partials in, one out.
constexpr double kChunk = 16.0 * 1024 * 1024;
ReduceOp sum_of_8(ReductionKernel k) { return ReduceOp{8, kChunk, k}; }

}  // namespace

TEST_CASE("ATen's reduction over stacked partials is slower than a copy of the same bytes", "[cost][reduction]") {
  const double copy = alone_us(ElementwiseOp{8 * kChunk, kChunk});
  const double aten = alone_us(sum_of_8(ReductionKernel::aten_sum));
  const double triton = alone_us(sum_of_8(ReductionKernel::triton));
  INFO("copy " << copy << " us, torch.sum " << aten << " us, Triton " << triton << " us");
  CHECK(aten > 1.2 * copy);
  // The Triton kernel is memory-bound: it moves the same bytes as fast as the copy.
  CHECK(triton == Approx(copy).epsilon(0.02));
  // PR 191803's range on its GPU: torch.sum at 23-43% of HBM peak, Triton at 82-88%.
  const double peak_fraction = 9 * kChunk / (aten * 1e-6) / (3.35e12);
  CHECK(peak_fraction > 0.23);
  CHECK(peak_fraction < 0.8);
}

TEST_CASE("An instruction-bound reduction does not speed up with more HBM bandwidth, a memory-bound one does",
          "[cost][reduction]") {
  HardwareSpec wide = h100();
  wide.memory.hbm_bytes_per_ps *= 2;
  const double aten = alone_us(sum_of_8(ReductionKernel::aten_sum));
  const double aten_wide = alone_us(sum_of_8(ReductionKernel::aten_sum), wide);
  const double triton = alone_us(sum_of_8(ReductionKernel::triton));
  const double triton_wide = alone_us(sum_of_8(ReductionKernel::triton), wide);
  CHECK(aten_wide == Approx(aten).epsilon(0.01));
  CHECK(triton_wide < 0.8 * triton);
  // ...and the instruction-bound one halves with twice the rate per SM, where HBM has the
  // room for it (on h100_sxm itself, twice torch.sum's rate would be HBM-bound).
  HardwareSpec faster_sms = wide;
  faster_sms.reduction.sm_bytes_per_ps[static_cast<int>(ReductionKernel::aten_sum)] *= 2;
  CHECK(alone_us(sum_of_8(ReductionKernel::aten_sum), faster_sms) == Approx(aten_wide / 2).epsilon(0.05));
}

TEST_CASE("Reduction time grows with the bytes it reads: twice the partials, nearly twice the time", "[cost][reduction]") {
  for (ReductionKernel k : {ReductionKernel::aten_sum, ReductionKernel::triton}) {
    const double four = alone_us(ReduceOp{4, kChunk, k});
    const double nine = alone_us(ReduceOp{9, kChunk, k});  // (9 + 1) / (4 + 1) = 2x the bytes
    INFO(reduction_kernel_name(k));
    CHECK(nine / four == Approx(2.0).epsilon(0.05));
  }
}

TEST_CASE("Reduction kernels are named and parsed both ways", "[cost][reduction]") {
  for (ReductionKernel k : {ReductionKernel::aten_sum, ReductionKernel::triton})
    CHECK(parse_reduction_kernel(reduction_kernel_name(k)) == k);
  CHECK_FALSE(parse_reduction_kernel("torch_sum").has_value());
}

#include "support/catch.hpp"

#include <vector>

#include "support/simulate.hpp"
#include "tpsim/cost/reduction_cost.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

// The sum that ends a 2-rank reduce-scatter of a 16 MiB chunk: 2 partials in, one out,
// and an 8-rank one's 8 partials.
constexpr double kChunk = 16.0 * 1024 * 1024;
ReduceOp sum_of_2(ReductionKernel k) { return ReduceOp{2, kChunk, k}; }

}  // namespace

TEST_CASE("ATen's sum of few partials is slower than a copy of the same bytes, Triton's is not", "[cost][reduction]") {
  const double copy = kernel_alone_us(ElementwiseOp{2 * kChunk, kChunk});
  const double aten = kernel_alone_us(sum_of_2(ReductionKernel::aten_sum));
  const double triton = kernel_alone_us(sum_of_2(ReductionKernel::triton));
  INFO("copy " << copy << " us, torch.sum " << aten << " us, Triton " << triton << " us");
  CHECK(aten > 1.2 * copy);
  // The Triton kernel is memory-bound: it moves the same bytes as fast as the copy.
  CHECK(triton == Approx(copy).epsilon(0.02));
  // Measured on an H100 SXM: torch.sum of 2 partials at 1.5 TB/s, 45% of HBM peak (PR 191803
  // gives 23-43% on its GPU).
  const double peak_fraction = 3 * kChunk / (aten * 1e-6) / (3.35e12);
  CHECK(peak_fraction > 0.23);
  CHECK(peak_fraction < 0.6);
}

TEST_CASE("An instruction-bound reduction does not speed up with more HBM bandwidth, a memory-bound one does",
          "[cost][reduction]") {
  HardwareSpec wide = h100();
  wide.memory.hbm_bytes_per_ps *= 2;
  const double aten = kernel_alone_us(sum_of_2(ReductionKernel::aten_sum));
  const double aten_wide = kernel_alone_us(sum_of_2(ReductionKernel::aten_sum), wide);
  const double triton = kernel_alone_us(sum_of_2(ReductionKernel::triton));
  const double triton_wide = kernel_alone_us(sum_of_2(ReductionKernel::triton), wide);
  CHECK(aten_wide == Approx(aten).epsilon(0.01));
  CHECK(triton_wide < 0.8 * triton);
  // ...and the instruction-bound one halves with twice the rates per SM, where HBM has the room
  // (all but its start-up, which is latency, not instructions).
  HardwareSpec faster_sms = wide;
  const int k = static_cast<int>(ReductionKernel::aten_sum);
  faster_sms.reduction.sm_bytes_per_ps[k] *= 2;
  faster_sms.reduction.sm_output_bytes_per_ps[k] *= 2;
  faster_sms.reduction.sm_round_output_bytes_per_ps[k] *= 2;
  const double start_us = to_us(wide.reduction.block_overhead[k]);
  CHECK(start_us > 0);
  CHECK(kernel_alone_us(sum_of_2(ReductionKernel::aten_sum), faster_sms) - start_us == Approx((aten_wide - start_us) / 2).epsilon(0.05));
}

TEST_CASE("Reduction time grows with the bytes it reads: twice the partials, nearly twice the time where bytes bind",
          "[cost][reduction]") {
  const double four = kernel_alone_us(ReduceOp{4, kChunk, ReductionKernel::triton});
  const double nine = kernel_alone_us(ReduceOp{9, kChunk, ReductionKernel::triton});  // (9 + 1) / (4 + 1) = 2x the bytes
  CHECK(nine / four == Approx(2.0).epsilon(0.05));
  // ATen's sum pays per output too, so it grows less than its bytes (measured 4 -> 8 partials of
  // 256 MiB: 1.52x the time for 1.8x the bytes), but it grows.
  const double aten_four = kernel_alone_us(ReduceOp{4, kChunk, ReductionKernel::aten_sum});
  const double aten_nine = kernel_alone_us(ReduceOp{9, kChunk, ReductionKernel::aten_sum});
  CHECK(aten_nine / aten_four > 1.2);
  CHECK(aten_nine / aten_four < 2.0);
}

TEST_CASE("Reduction kernels are named and parsed both ways", "[cost][reduction]") {
  for (ReductionKernel k : {ReductionKernel::aten_sum, ReductionKernel::triton})
    CHECK(parse_reduction_kernel(reduction_kernel_name(k)) == k);
  CHECK_FALSE(parse_reduction_kernel("torch_sum").has_value());
}

TEST_CASE("ATen's sum pays per output element: 2 partials take nearly as long as 4, far below HBM, and 8 reach it",
          "[cost][reduction]") {
  // Measured on an H100 SXM (h100_sxm_torch_ops.json), 256 MiB partials: 2 -> 533 us, 4 -> 560 us,
  // 8 -> 851 us (2.84 TB/s); the bytes grow 3 : 5 : 9.
  constexpr double kBig = 256.0 * 1024 * 1024;
  const double two = kernel_alone_us(ReduceOp{2, kBig, ReductionKernel::aten_sum});
  const double four = kernel_alone_us(ReduceOp{4, kBig, ReductionKernel::aten_sum});
  const double eight = kernel_alone_us(ReduceOp{8, kBig, ReductionKernel::aten_sum});
  INFO("2: " << two << " us, 4: " << four << " us, 8: " << eight << " us");
  CHECK(four / two < 1.25);  // 5/3 the bytes
  CHECK(3 * kBig / (two * 1e-6) < 0.6 * 3.35e12);
  const double hbm_us = 9 * kBig / h100().memory.hbm_bytes_per_ps * 1e-6;
  CHECK(eight == Approx(hbm_us).epsilon(0.05));
  // Without the per-output cost the same kernel is bound by its bytes alone.
  HardwareSpec per_byte = h100();
  per_byte.reduction.sm_output_bytes_per_ps[static_cast<int>(ReductionKernel::aten_sum)] = 0;
  CHECK(kernel_alone_us(ReduceOp{2, kBig, ReductionKernel::aten_sum}, per_byte) < 0.8 * two);
}

TEST_CASE("ATen's sum loads the partials in rounds of 4: 2, 3 and 4 partials take one step of a staircase, 5 to 8 the next",
          "[cost][reduction]") {
  // HBM made ample, so the rounds show rather than the bytes (on the H200 they do: 2 and 4
  // partials of 64 MiB take 126 and 129 us, 8 take 185 us, below its HBM's rate).
  HardwareSpec ample = h100();
  ample.memory.hbm_bytes_per_ps *= 4;
  const int k = static_cast<int>(ReductionKernel::aten_sum);
  REQUIRE(ample.reduction.loads_per_round[k] == 4);
  std::vector<double> us;
  for (int partials = 1; partials <= 9; ++partials)
    us.push_back(kernel_alone_us(ReduceOp{partials, kChunk, ReductionKernel::aten_sum}, ample));
  const auto at = [&](int partials) { return us[static_cast<std::size_t>(partials - 1)]; };
  INFO("1..9 partials: " << at(1) << " " << at(2) << " " << at(3) << " " << at(4) << " " << at(5) << " " << at(8) << " " << at(9) << " us");
  // Within a step only the per-byte work grows (a few percent); between steps a whole round.
  CHECK(at(4) / at(2) < 1.1);
  CHECK(at(8) / at(5) < 1.1);
  const double step = at(5) - at(4);
  CHECK(step > 3 * (at(4) - at(3)));
  CHECK(at(9) - at(8) == Approx(step).epsilon(0.1));
  // Time never falls as partials are added.
  for (int partials = 2; partials <= 9; ++partials) CHECK(at(partials) >= at(partials - 1));
  // Without rounds (a kernel that loads every partial at once) the staircase is gone.
  HardwareSpec flat = ample;
  flat.reduction.loads_per_round[k] = 0;
  const double flat4 = kernel_alone_us(ReduceOp{4, kChunk, ReductionKernel::aten_sum}, flat);
  const double flat5 = kernel_alone_us(ReduceOp{5, kChunk, ReductionKernel::aten_sum}, flat);
  CHECK(flat5 - flat4 < 0.3 * step);
}

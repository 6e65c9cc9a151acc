#include "support/catch.hpp"

#include <cmath>

#include "support/simulate.hpp"
#include "tpsim/hw/hardware_spec.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

HardwareSpec limited(double watts) {
  HardwareSpec hw = h100();
  hw.power = {watts, 700.0, 2.0};
  return hw;
}

}  // namespace

TEST_CASE("Power goes as speed to the exponent: a quarter of the draw at exponent 2 is half the speed", "[power]") {
  CHECK(PowerSpec{175.0, 700.0, 2.0}.tensor_speed() == Approx(0.5));
  CHECK(PowerSpec{87.5, 700.0, 3.0}.tensor_speed() == Approx(0.5));
  // A limit at or above the sustained draw never speeds the kernels past the rate they were measured at.
  CHECK(PowerSpec{700.0, 700.0, 2.0}.tensor_speed() == 1.0);
  CHECK(PowerSpec{1000.0, 700.0, 2.0}.tensor_speed() == 1.0);
  CHECK(PowerSpec{}.tensor_speed() == 1.0);
}

TEST_CASE("Lowering the power limit slows tensor-core kernels monotonically", "[power]") {
  double last = 2.0;
  for (double w : {700.0, 600.0, 500.0, 400.0, 300.0}) {
    const double s = limited(w).power.tensor_speed();
    CHECK(s < last + 1e-12);
    CHECK(s > 0);
    last = s;
  }
}

TEST_CASE("A power limit lengthens a compute-bound GEMM by 1/speed and leaves a weight-streaming one near HBM's time", "[power][gemm]") {
  const HardwareSpec capped = limited(175.0);  // half speed
  REQUIRE(capped.power.tensor_speed() == Approx(0.5));
  const double big = gemm_alone_us(8192, 8192, 8192, Dtype::bf16);
  const double big_capped = gemm_alone_us(8192, 8192, 8192, Dtype::bf16, capped);
  CHECK(big_capped / big == Approx(2.0).epsilon(0.03));
  // 16 rows against a 58.7 MB weight: reading the weight, not the MMAs, sets the time.
  const double thin = gemm_alone_us(16, 3584, 8192, Dtype::bf16);
  const double thin_capped = gemm_alone_us(16, 3584, 8192, Dtype::bf16, capped);
  CHECK(thin_capped / thin < 1.25);
  // FFMA (fp32) GEMMs keep their rate.
  CHECK(gemm_alone_us(4096, 4096, 4096, Dtype::fp32, capped) == Approx(gemm_alone_us(4096, 4096, 4096, Dtype::fp32)).epsilon(1e-9));
}

TEST_CASE("A burst runs tensor cores at burst_speed whatever the limit, and FFMA and weight streaming barely notice", "[power][gemm]") {
  HardwareSpec burst = limited(175.0);  // a limit that would halve the speed if sustained
  burst.power.burst_speed = 1.25;
  burst.power.burst = true;
  CHECK(burst.power.tensor_speed() == 1.25);
  // A burst on a model that gives no ceiling speed keeps the sustained law, never a zero rate.
  HardwareSpec unknown = limited(175.0);
  unknown.power.burst = true;
  CHECK(unknown.power.tensor_speed() == Approx(0.5));
  const double big = gemm_alone_us(8192, 8192, 8192, Dtype::bf16);
  CHECK(big / gemm_alone_us(8192, 8192, 8192, Dtype::bf16, burst) == Approx(1.25).epsilon(0.03));
  const double thin = gemm_alone_us(16, 3584, 8192, Dtype::bf16);
  CHECK(thin / gemm_alone_us(16, 3584, 8192, Dtype::bf16, burst) < 1.05);
  CHECK(gemm_alone_us(4096, 4096, 4096, Dtype::fp32, burst) == Approx(gemm_alone_us(4096, 4096, 4096, Dtype::fp32)).epsilon(1e-9));
}

TEST_CASE("The shipped H100s burst to the same clock ceiling whatever their sustained limit", "[power][hardware]") {
  // 817.1 us back to back at 1,420 MHz against 701.8 at the 1,980 MHz ceiling (power/h100_sxm_gemm_clock.json).
  CHECK(h100().power.burst_speed == Approx(817.09 / 701.78).epsilon(0.001));
  CHECK_FALSE(h100().power.burst);
  HardwareSpec part = load_hardware_file(models_dir() + "/h100_hbm2e_500w.json");
  CHECK(part.power.tensor_speed() < 0.9);
  part.power.burst = true;
  CHECK(part.power.tensor_speed() == h100().power.burst_speed);
}

TEST_CASE("The shipped H200 bursts by its own clock run, and at its 700 W limit runs at full sustained speed", "[power][hardware]") {
  // 819.6 us back to back at 1,508 MHz against 707.9 at the 1,980 MHz ceiling with 4 GiB of copies
  // between calls (power/h200_gemm_clock_duty.json): its own ratio, not the H100's.
  HardwareSpec h200 = load_hardware_file(models_dir() + "/h200.json");
  CHECK(h200.power.burst_speed == Approx(819.55 / 707.87).epsilon(0.001));
  CHECK(h200.power.burst_speed < h100().power.burst_speed);
  CHECK(h200.power.tensor_speed() == Approx(1.0));
  h200.power.burst = true;
  CHECK(h200.power.tensor_speed() == h200.power.burst_speed);
}

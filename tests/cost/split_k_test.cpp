#include <random>

#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/gemm_cost.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

// A thin, deep GEMM whose 128x128 tiles fill under a quarter of the SMs (30 of 132): split-K's shape.
constexpr std::int64_t kM = 384, kN = 1280, kK = 8192;

HardwareSpec without_split_k() {
  HardwareSpec hw = h100();
  hw.gemm.max_split_k = 1;
  return hw;
}

}  // namespace

TEST_CASE("Split-K writes fp32 partials in place of C and its reduction kernel reads back exactly those", "[cost][gemm][split_k]") {
  const HardwareSpec hw = h100();
  const GemmPlan plan = plan_gemm(GemmProblem{kM, kN, kK, Dtype::bf16}, hw);
  REQUIRE(plan.split_k > 1);
  const double mn = static_cast<double>(kM * kN), s = plan.split_k;
  CHECK(plan.reduction_read_bytes == 4.0 * mn * s);
  CHECK(plan.reduction_written_bytes == 2.0 * mn);
  // The GEMM reads A and B and writes the partials; C is the reduction's to write.
  CHECK(plan.hbm_bytes == Approx(2.0 * static_cast<double>(kM * kK + kK * kN) + 4.0 * mn * s));

  const GemmPlan whole = plan_gemm(GemmProblem{kM, kN, kK, Dtype::bf16}, without_split_k());
  REQUIRE(whole.split_k == 1);
  CHECK(whole.reduction_read_bytes == 0);
  CHECK(whole.reduction_written_bytes == 0);
  CHECK(split_k_reduction_time(whole, hw) == 0);
}

TEST_CASE("A split-K GEMM ends with its reduction kernel: a slower start-up adds to it once, and enough of it drives split-K out",
          "[cost][gemm][split_k]") {
  const HardwareSpec hw = h100();
  const double base = gemm_alone_us(kM, kN, kK, Dtype::bf16, hw);
  REQUIRE(plan_gemm(GemmProblem{kM, kN, kK, Dtype::bf16}, hw).split_k > 1);
  // The reduction is queued behind the GEMM, not beside it: its start-up is on the op's path.
  HardwareSpec slower = hw;
  slower.elementwise.block_overhead += ticks_from_us(0.5);
  const GemmPlan still = plan_gemm(GemmProblem{kM, kN, kK, Dtype::bf16}, slower);
  REQUIRE(still.split_k > 1);
  CHECK(gemm_alone_us(kM, kN, kK, Dtype::bf16, slower) == Approx(base + 0.5).margin(1e-6));
  // A reduction that costs more than the idle SMs save: the heuristic keeps K whole, and the
  // GEMM costs what it costs without split-K, never more.
  HardwareSpec costly = hw;
  costly.elementwise.block_overhead += ticks_from_us(1000);
  CHECK(plan_gemm(GemmProblem{kM, kN, kK, Dtype::bf16}, costly).split_k == 1);
  const double whole = gemm_alone_us(kM, kN, kK, Dtype::bf16, without_split_k());
  CHECK(gemm_alone_us(kM, kN, kK, Dtype::bf16, costly) == Approx(whole).margin(1e-6));
  // And split-K is chosen only where it pays, reduction included.
  CHECK(base < whole);
}

TEST_CASE("A split-K GEMM's trace names its reduction, and the op spans both kernels while a plain GEMM has none", "[cost][gemm][split_k]") {
  const HardwareSpec hw = h100();
  Dag dag(1);
  const OpId split = dag.add(0, 0, "split", GemmOp{{kM, kN, kK, Dtype::bf16}});
  const OpId whole = dag.add(0, 0, "whole", GemmOp{{4096, 4096, 4096, Dtype::bf16}});  // after it on the stream
  const Timeline tl = execute(dag, hw, true);
  const GemmPlan plan = plan_gemm(GemmProblem{kM, kN, kK, Dtype::bf16}, hw);
  CHECK_THAT(tl.detail(split), Catch::Matchers::Contains("split-k " + std::to_string(plan.split_k)) &&
                                   Catch::Matchers::Contains("then a reduction of the partials"));
  CHECK_THAT(tl.detail(whole), !Catch::Matchers::Contains("reduction"));
  // The op's span is the GEMM's waves and then the reduction, as the heuristic estimated them.
  CHECK(op_us(tl, split) == Approx(static_cast<double>(estimate_gemm_time(plan, hw, hw.sm.count)) / 1e6).epsilon(0.02));
  CHECK(op_us(tl, split) > static_cast<double>(split_k_reduction_time(plan, hw)) / 1e6);
}

TEST_CASE("The tile heuristic's estimate of a GEMM alone is what the simulator takes: never less, at most 2% more", "[cost][gemm][split_k][property]") {
  // The estimate shares the HBM among a wave's blocks as the simulator's pool does (a block
  // granted less than it asks is paced by its bytes, its prologue hidden in them); only a
  // partial last wave, whose blocks draw more each, runs faster than estimated.
  std::mt19937 rng(3);
  const HardwareSpec hw = h100();
  int splits = 0;
  for (int i = 0; i < 120; ++i) {
    const std::int64_t m = 64 * (1 + rng() % 128), n = 64 * (1 + rng() % 128), k = 64 * (1 + rng() % 256);
    const Dtype d = i % 3 == 0 ? Dtype::fp8 : Dtype::bf16;
    const GemmPlan plan = plan_gemm(GemmProblem{m, n, k, d}, hw);
    splits += plan.split_k > 1;
    const double estimate = static_cast<double>(estimate_gemm_time(plan, hw, hw.sm.count)) / 1e6;
    const double simulated = gemm_alone_us(m, n, k, d, hw);
    INFO(fmt::format("{}x{}x{} {}: tile {}x{}, split {}: estimate {:.3f} us, simulated {:.3f} us", m, n, k, dtype_name(d), plan.tile.m,
                     plan.tile.n, plan.split_k, estimate, simulated));
    // Each wave's blocks end on a whole picosecond: up to one apart per wave.
    const double waves = static_cast<double>((plan.blocks + hw.sm.count - 1) / hw.sm.count);
    CHECK(estimate >= simulated - 1e-6 * (waves + 10));
    CHECK(estimate <= simulated * 1.02);
  }
  CHECK(splits > 0);
}

// A GEMM whose plan a measurement names (the vendor kernel's tile and split-K): priced as
// given, so the kernel-time model can be checked apart from the choice of plan.
#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/cost/gemm_planner.hpp"

using namespace tpsim;
using namespace tpsim::test;

TEST_CASE("A named plan is priced as given: naming the plan tpsim would choose changes nothing, naming another prices that one",
          "[cost][gemm][named_plan]") {
  const HardwareSpec& hw = h100();
  for (const GemmProblem& p : {GemmProblem{128, 4096, 14336, Dtype::bf16}, GemmProblem{4096, 4096, 4096, Dtype::bf16},
                               GemmProblem{512, 6656, 8192, Dtype::fp8}}) {
    const GemmPlan chosen = plan_gemm(p, hw);
    GemmProblem named = p;
    named.named_plan = {chosen.tile.m, chosen.tile.n, chosen.tile.k, chosen.split_k};
    const GemmPlan again = plan_gemm(named, hw);
    CHECK(again.tile.m == chosen.tile.m);
    CHECK(again.tile.n == chosen.tile.n);
    CHECK(again.split_k == chosen.split_k);
    CHECK(again.tile.mainloop_efficiency == chosen.tile.mainloop_efficiency);
    CHECK(estimate_gemm_time(again, hw, hw.sm.count) == estimate_gemm_time(chosen, hw, hw.sm.count));
  }
  // A split the library ran where tpsim would not: its slices and the reduction kernel after them.
  GemmProblem p{1024, 4096, 8192, Dtype::bf16};
  const GemmPlan whole = plan_gemm(p, hw);
  REQUIRE(whole.split_k == 1);
  p.named_plan = {whole.tile.m, whole.tile.n, whole.tile.k, 2};
  const GemmPlan split = plan_gemm(p, hw);
  CHECK(split.split_k == 2);
  CHECK(split.blocks == 2 * whole.blocks);
  CHECK(split.reduction_read_bytes == 4.0 * 2 * 1024 * 4096);
  CHECK(estimate_gemm_time(split, hw, hw.sm.count) > estimate_gemm_time(whole, hw, hw.sm.count));
}

TEST_CASE("A named tile the hardware file does not list runs at its kernel family's rate", "[cost][gemm][named_plan]") {
  const HardwareSpec& hw = h100();
  GemmProblem p{768, 1280, 4096, Dtype::bf16};
  p.named_plan = {80, 128, 64, 1};  // nvjet's 128x80 tile
  const GemmPlan plan = plan_gemm(p, hw);
  CHECK(plan.tile.m == 80);
  CHECK(plan.tile.n == 128);
  CHECK(plan.tiles == 10 * 10);
  const GemmTile* family = nullptr;
  for (const GemmTile& t : hw.gemm.tiles)
    if (t.serves(Dtype::bf16) && !family) family = &t;
  REQUIRE(family);
  CHECK(plan.tile.mainloop_efficiency == family->mainloop_efficiency);
  CHECK(plan.tile.serves(Dtype::bf16));
  // Smaller tiles load more operand bytes per FLOP from L2: a 64x64 tile of the same problem
  // computes no faster per SM than a 128x128 one.
  GemmProblem small = p, large = p;
  small.named_plan = {64, 64, 64, 1};
  large.named_plan = {128, 128, 64, 1};
  CHECK(tile_flops_per_ps(plan_gemm(small, hw).tile, Dtype::bf16, hw) <= tile_flops_per_ps(plan_gemm(large, hw).tile, Dtype::bf16, hw));
}

TEST_CASE("The planner tells problems apart by their named plans", "[cost][gemm][named_plan]") {
  const HardwareSpec& hw = h100();
  GemmPlanner planner(hw);
  GemmProblem a{256, 3584, 8192, Dtype::bf16}, b = a, c = a;
  b.named_plan = {64, 128, 64, 1};
  c.named_plan = {64, 128, 64, 2};
  const GemmPlan pa = planner.plan(a), pb = planner.plan(b), pc = planner.plan(c);
  CHECK(pb.tile.m == 64);
  CHECK(pb.split_k == 1);
  CHECK(pc.split_k == 2);
  CHECK(planner.plan(b).split_k == 1);  // remembered apart from c
  CHECK(pa.split_k == plan_gemm(a, hw).split_k);
}

TEST_CASE("A named plan's cluster pads the grid to whole clusters and runs no more CTAs than the GPCs hold",
          "[cost][gemm][named_plan]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.sm.resident_cluster_ctas(4) == 120);  // measured: 30 clusters of 4 fit its GPCs
  GemmProblem p{256, 3584, 8192, Dtype::bf16};  // 2 x 56 tiles of 128x64
  p.named_plan = {128, 64, 64, 1};
  const GemmPlan alone = plan_gemm(p, hw);
  CHECK(alone.tiles == 112);
  CHECK(alone.resident_blocks == 0);
  // Clusters that divide the grid and fit one wave change nothing here.
  for (const auto& [cm, cn] : {std::pair{2, 1}, {1, 2}, {2, 4}}) {
    GemmProblem c = p;
    c.named_plan.cluster = {cm, cn};
    const GemmPlan plan = plan_gemm(c, hw);
    CHECK(plan.tiles == 112);
    CHECK(estimate_gemm_time(plan, hw, hw.sm.count) == estimate_gemm_time(alone, hw, hw.sm.count));
  }
  // Four CTAs along rows over two row tiles: the grid doubles with padding CTAs, which hold SMs.
  GemmProblem over = p;
  over.named_plan.cluster = {4, 1};
  const GemmPlan padded = plan_gemm(over, hw);
  CHECK(padded.tiles == 224);
  CHECK(padded.resident_blocks == 120);
  CHECK(estimate_gemm_time(padded, hw, hw.sm.count) > 1.8 * estimate_gemm_time(alone, hw, hw.sm.count));
  // 128 CTAs in clusters of 4: 120 run, then 8: a second wave, in the simulator as in the estimate.
  GemmProblem wide{512, 4096, 14336, Dtype::bf16};
  wide.named_plan = {128, 128, 64, 1};
  GemmProblem in_fours = wide;
  in_fours.named_plan.cluster = {2, 2};
  REQUIRE(plan_gemm(in_fours, hw).tiles == 128);
  const double one_wave = kernel_alone_us(GemmOp{wide}), two_waves = kernel_alone_us(GemmOp{in_fours});
  INFO(one_wave << " us in clusters of 1, " << two_waves << " in clusters of 4");
  CHECK(two_waves > 1.6 * one_wave);
  CHECK(two_waves < 2.1 * one_wave);
}

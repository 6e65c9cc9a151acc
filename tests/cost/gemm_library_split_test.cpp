// cuBLAS's own split-K choice (gemm.library_split): when it splits, how many slices, and what
// that costs against the plan predicted fastest.
#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/cost/gemm_library_split.hpp"
#include "tpsim/report/result_writers.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

HardwareSpec autotuned() {
  HardwareSpec hw = h100();
  hw.gemm.library_split = {};
  return hw;
}

std::int64_t tiles_of(const GemmProblem& p, const GemmTile& t) { return ((p.m + t.m - 1) / t.m) * ((p.n + t.n - 1) / t.n); }

}  // namespace

TEST_CASE("cuBLAS splits a thin, deep GEMM into one wave of slices and keeps a wide one whole", "[cost][gemm][library_split]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.gemm.library_split.serves(Dtype::bf16));
  // A 128-row shard against Llama 3 8B's w2 (14,336 deep): 32 reference tiles, under 132 x (1 - 6900/14336).
  const GemmProblem thin{128, 4096, 14336, Dtype::bf16};
  REQUIRE(library_splits_k(thin, hw));
  const GemmPlan plan = plan_gemm(thin, hw);
  CHECK(plan.split_k > 1);
  CHECK(plan.library_split);
  CHECK(plan.split_k == library_split_slices(thin, plan.tile, hw));
  CHECK(plan.blocks <= hw.sm.count);                                   // one wave
  CHECK(plan.blocks + tiles_of(thin, plan.tile) > hw.sm.count);        // one more slice would not fit it
  CHECK(thin.k / plan.split_k >= hw.gemm.library_split.min_slice);
  // Its whole-GPU counterpart: 1,024 reference tiles, never split; the plan is the fastest one.
  const GemmProblem wide{4096, 4096, 14336, Dtype::bf16};
  CHECK_FALSE(library_splits_k(wide, hw));
  const GemmPlan whole = plan_gemm(wide, hw), fastest = plan_gemm(wide, autotuned());
  CHECK_FALSE(whole.library_split);
  CHECK(whole.split_k == fastest.split_k);
  CHECK(whole.tile.m == fastest.tile.m);
  CHECK(whole.tile.n == fastest.tile.n);
}

TEST_CASE("The split decision follows depth (once split, every deeper GEMM of the same output is split) and a full wave of tiles is never split",
          "[cost][gemm][library_split]") {
  const HardwareSpec& hw = h100();
  for (std::int64_t m : {64, 128, 256, 512, 1024, 2048})
    for (std::int64_t n : {1280, 4096, 8192, 16384}) {
      bool split = false;
      for (std::int64_t k = 1024; k <= 65536; k *= 2) {
        const bool now = library_splits_k(GemmProblem{m, n, k, Dtype::bf16}, hw);
        INFO(m << "x" << n << "x" << k);
        CHECK((now || !split));  // never unsplit by more depth
        split = now;
        if ((m + 127) / 128 * ((n + 127) / 128) >= hw.sm.count) CHECK_FALSE(now);
      }
    }
}

TEST_CASE("The library's split plan is never predicted faster than the fastest plan, and costs the thin deep shards more",
          "[cost][gemm][library_split]") {
  // Its plans lie inside the planner's search (a wave of slices, each deep enough), so the
  // fastest plan bounds them from below; for weight-streaming shards cuBLAS's ranking, blind to
  // HBM, picks slower ones (measured: h100_sxm_thin_gemm.json, README).
  const HardwareSpec& hw = h100();
  bool slower_somewhere = false;
  for (std::int64_t m : {64, 128, 256})
    for (std::int64_t n : {1280, 3584, 4096, 6656})
      for (std::int64_t k : {8192, 14336, 16384, 28672}) {
        const GemmProblem p{m, n, k, Dtype::bf16};
        const Tick library = estimate_gemm_time(plan_gemm(p, hw), hw, hw.sm.count);
        const Tick fastest = estimate_gemm_time(plan_gemm(p, autotuned()), hw, hw.sm.count);
        INFO(m << "x" << n << "x" << k);
        CHECK(library >= fastest);
        if (library > fastest) slower_somewhere = true;
      }
  CHECK(slower_somewhere);
  CHECK(gemm_alone_us(128, 6656, 16384, Dtype::bf16) > 1.05 * gemm_alone_us(128, 6656, 16384, Dtype::bf16, autotuned()));
}

TEST_CASE("fp8, fp32, batched, grouped and custom kernels' GEMMs keep the fastest plan", "[cost][gemm][library_split]") {
  const HardwareSpec& hw = h100();
  const auto same_plan = [&](const GemmProblem& p) {
    const GemmPlan a = plan_gemm(p, hw), b = plan_gemm(p, autotuned());
    return a.split_k == b.split_k && a.tile.m == b.tile.m && a.tile.n == b.tile.n && a.blocks == b.blocks;
  };
  REQUIRE_FALSE(same_plan(GemmProblem{128, 6656, 16384, Dtype::bf16}));
  CHECK(same_plan(GemmProblem{128, 6656, 16384, Dtype::fp8}));   // cuBLAS split none of 36 fp8 shapes
  CHECK(same_plan(GemmProblem{128, 6656, 16384, Dtype::fp32}));  // not measured
  CHECK(same_plan(GemmProblem{128, 6656, 16384, Dtype::bf16, 4}));
  CHECK(same_plan(GemmProblem{128, 6656, 16384, Dtype::bf16, 4, true}));
  GemmProblem fused{128, 6656, 16384, Dtype::bf16};
  fused.by_library = false;
  CHECK(same_plan(fused));
}

TEST_CASE("A scenario that says its GEMMs are autotuned drops the library's rule, and says so in its result", "[cost][gemm][library_split][io]") {
  const std::string base = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "matmul_reducescatter", "m": 1024, "k": 14336, "n": 4096}, "variants": ["async_tp"])";
  const RunResult library = simulate(base + "}");
  const RunResult fastest = simulate(base + R"(, "software": {"gemm_choice": "fastest"}})");
  CHECK(library.scenario.hardware.gemm.library_split.serves(Dtype::bf16));
  CHECK_FALSE(fastest.scenario.hardware.gemm.library_split.serves(Dtype::bf16));
  CHECK(result_json(library)["software"]["gemm_choice"] == "library");
  CHECK(result_json(fastest)["software"]["gemm_choice"] == "fastest");
  // Each step's 128-row submatmul streams the 117 MB weight; cuBLAS's split plan streams it slower.
  CHECK(makespan_us(library, "async_tp") > makespan_us(fastest, "async_tp"));
  // The trace says whose rule split a GEMM.
  Dag dag(1);
  const OpId thin = dag.add(0, 0, "thin", GemmOp{{128, 4096, 14336, Dtype::bf16}});
  const OpId wide = dag.add(0, 0, "wide", GemmOp{{4096, 4096, 14336, Dtype::bf16}});
  const Timeline tl = execute(dag, h100(), true);
  CHECK_THAT(tl.detail(thin), Catch::Matchers::Contains("(the library's split rule)"));
  CHECK_THAT(tl.detail(wide), !Catch::Matchers::Contains("library"));
  CHECK_THAT(scenario_error(base + R"(, "software": {"gemm_choice": "best"}})"),
             Catch::Matchers::Contains("$.software.gemm_choice: unknown GEMM choice \"best\" (library or fastest)"));
}

// GEMM measurement rows that name the plan the library ran (its tile and split-K), or time
// another of cuBLASLt's algorithms than its first, and the plan read from cuBLASLt's record.
#include "support/catch.hpp"

#include "support/measurement_rows.hpp"
#include "tpsim/calibration/library_kernel.hpp"
#include "tpsim/calibration/measurement.hpp"

using namespace tpsim;
using test::error_of;
using test::parse;

TEST_CASE("A GEMM row may name the plan the library ran: its tile and split-K, checked and kept through a round trip",
          "[measurement]") {
  const auto ms = parse(R"([
      {"kind": "gemm", "m": 768, "n": 1280, "k": 4096, "dtype": "bf16", "time_us": 12.9, "plan": {"tile": "64x128x64"}},
      {"kind": "gemm", "m": 64, "n": 1280, "k": 4096, "dtype": "bf16", "time_us": 7.3, "plan": {"tile": "32x64x64", "split_k": 2}}])");
  REQUIRE(ms.size() == 2);
  const auto& whole = ms[0].gemm.named_plan;
  CHECK(whole.given());
  CHECK(whole.tile_m == 64);
  CHECK(whole.tile_n == 128);
  CHECK(whole.tile_k == 64);
  CHECK(whole.split_k == 1);
  CHECK(ms[1].gemm.named_plan.split_k == 2);
  CHECK(measurement_json(ms[1])["plan"] == Json::parse(R"({"tile": "32x64x64", "split_k": 2})"));
  CHECK(measurement_json(ms[0])["plan"] == Json::parse(R"({"tile": "64x128x64"})"));
  CHECK(!measurement_json(parse(R"([{"kind": "gemm", "m": 1, "n": 1, "k": 1, "dtype": "bf16", "time_us": 1}])")[0]).contains("plan"));
  CHECK(parse(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1}])")[0].gemm.named_plan.given() == false);

  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "plan": {"tile": "64x128"}}])") ==
        R"($.measurements[0].plan.tile: must look like "64x128x64" (rows x columns x depth, each 1 to 1024), got "64x128")");
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "plan": {"tile": "64x128x64", "split_k": 0}}])") ==
        "$.measurements[0].plan.split_k: must be a positive integer, got 0");
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "plan": {"tile": "64x128x64", "split_k": 9}}])") ==
        "$.measurements[0].plan.split_k: 9 slices of a K of 8");
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "plan": {"tile": "64x128x64", "splits": 2}}])")
            .starts_with(R"($.measurements[0].plan: unknown key "splits")"));
  CHECK(error_of(R"([{"kind": "gemm", "m": 64, "n": 8, "k": 8, "batch": 4, "grouped": true, "dtype": "bf16", "time_us": 1,
                      "plan": {"tile": "64x128x64"}}])") ==
        "$.measurements[0].plan: a grouped GEMM's tile is PyTorch's dispatch's, not a library plan");
  CHECK(error_of(R"([{"kind": "gemm_pair", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "plan": {"tile": "64x128x64"}}])")
            .starts_with(R"($.measurements[0]: unknown key "plan")"));
}

TEST_CASE("A GEMM row may time another of cuBLASLt's algorithms than its first, and then names the plan it ran",
          "[measurement][named_plan]") {
  const auto ms = parse(R"([
      {"kind": "gemm", "m": 256, "n": 3584, "k": 8192, "dtype": "bf16", "time_us": 31, "heuristic_rank": 3,
       "plan": {"tile": "128x64x64"}},
      {"kind": "gemm", "m": 256, "n": 3584, "k": 8192, "dtype": "bf16", "time_us": 31, "heuristic_rank": 0}])");
  CHECK(ms[0].gemm.heuristic_rank == 3);
  CHECK(ms[0].gemm.named_plan.tile_n == 64);
  CHECK(measurement_json(ms[0])["heuristic_rank"] == 3);
  CHECK(parse(std::string("[") + measurement_json(ms[0]).dump() + "]")[0].gemm == ms[0].gemm);  // round trip
  CHECK(ms[1].gemm.heuristic_rank == 0);  // the heuristic's first choice: what cuBLAS runs, tpsim's own plan
  CHECK(!measurement_json(ms[1]).contains("heuristic_rank"));
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "heuristic_rank": 2}])") ==
        R"($.measurements[0].heuristic_rank: a row that timed another algorithm than the heuristic's first must name its "plan" (tile and split_k))");
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "heuristic_rank": 32,
                      "plan": {"tile": "64x64x64"}}])") == "$.measurements[0].heuristic_rank: 32 is past the heuristic's first 32 algorithms");
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "heuristic_rank": -1}])")
            .starts_with("$.measurements[0].heuristic_rank: "));
  CHECK(error_of(R"([{"kind": "gemm_pair", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "heuristic_rank": 1}])")
            .starts_with(R"($.measurements[0]: unknown key "heuristic_rank")"));
}

TEST_CASE("A GEMM row may make its algorithm run in another thread-block cluster, and then names the plan it ran",
          "[measurement][named_plan]") {
  const auto ms = parse(R"([
      {"kind": "gemm", "m": 256, "n": 3584, "k": 8192, "dtype": "bf16", "time_us": 33, "cluster": "4x2", "plan": {"tile": "128x64x64"}},
      {"kind": "gemm", "m": 256, "n": 3584, "k": 8192, "dtype": "bf16", "time_us": 36, "heuristic_rank": 2, "cluster": "1x1",
       "plan": {"tile": "64x64x64"}}])");
  CHECK(ms[0].gemm.cluster.m == 4);
  CHECK(ms[0].gemm.cluster.n == 2);
  CHECK(ms[0].gemm.heuristic_rank == 0);
  CHECK(ms[1].gemm.cluster.given());
  CHECK(ms[1].gemm.heuristic_rank == 2);
  CHECK(measurement_json(ms[0])["cluster"] == "4x2");
  CHECK(parse(std::string("[") + measurement_json(ms[1]).dump() + "]")[0].gemm == ms[1].gemm);  // round trip
  CHECK(ms[0].gemm != ms[1].gemm);
  CHECK(ms[0].gemm.named_plan.cluster == GemmProblem::Cluster{4, 2});  // the plan ran in the cluster the row imposed: priced in it
  // A plan may name the cluster cuBLASLt gave it; a row that imposes another contradicts it.
  const auto given = parse(R"([{"kind": "gemm", "m": 256, "n": 3584, "k": 8192, "dtype": "bf16", "time_us": 31,
                                 "plan": {"tile": "128x64x64", "cluster": "2x4"}}])");
  CHECK(given[0].gemm.named_plan.cluster == GemmProblem::Cluster{2, 4});
  CHECK(!given[0].gemm.cluster.given());
  CHECK(measurement_json(given[0])["plan"]["cluster"] == "2x4");
  CHECK(parse(std::string("[") + measurement_json(given[0]).dump() + "]")[0].gemm == given[0].gemm);
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "cluster": "2x1",
                      "plan": {"tile": "64x64x64", "cluster": "1x2"}}])") ==
        "$.measurements[0].cluster: the row made its algorithm run in clusters of 2x1, its plan says 1x2");
  CHECK(!parse(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1}])")[0].gemm.cluster.given());
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "cluster": "2x1"}])") ==
        R"($.measurements[0].cluster: a row that made its algorithm run in another cluster must name its "plan" (tile and split_k))");
  for (const char* bad : {"2", "2x", "0x2", "2x4x1", "8x4", "17x1", "axb"})
    CHECK(error_of(fmt::format(R"([{{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "cluster": "{}",
                                     "plan": {{"tile": "64x64x64"}}}}])",
                               bad)) ==
          fmt::format(R"($.measurements[0].cluster: must look like "2x4" (CTAs along rows x columns, at most 16 in all), got "{}")", bad));
  CHECK(error_of(R"([{"kind": "gemm_pair", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "time_us": 1, "cluster": "2x1"}])")
            .starts_with(R"($.measurements[0]: unknown key "cluster")"));
}

TEST_CASE("The plan of a cuBLASLt algorithm as microbench records it: tile, the stages' depth and the split",
          "[measurement][named_plan]") {
  const auto plan = plan_of_lt_algorithm(
      "cuBLASLt algo 66, tile 64x80, split-K 2, stages 64xAUTO, cluster 1x4x1, swizzle 0, reduction scheme 2");
  REQUIRE(plan.has_value());
  CHECK(plan->tile_m == 64);
  CHECK(plan->tile_n == 80);
  CHECK(plan->tile_k == 64);
  CHECK(plan->split_k == 2);
  CHECK(plan->cluster == GemmProblem::Cluster{1, 4});  // the cluster it ran in, as cublas_plans.py reads it
  CHECK_FALSE(plan_of_lt_algorithm("cuBLASLt algo 66, tile 64x64, split-K 1, stages 64xAUTO, cluster auto")->cluster.given());
  CHECK(plan_of_lt_algorithm("cuBLASLt algo 66, tile 320x128, split-K 1, stages 128xAUTO, cluster 1x2x1")->tile_k == 128);
  CHECK_FALSE(plan_of_lt_algorithm("cuBLASLt algo 66, tile undefined, split-K 1, stages 64xAUTO, cluster auto").has_value());
  CHECK_FALSE(plan_of_lt_algorithm("cuBLASLt algo 66, tile id 999, split-K 1, stages 64xAUTO, cluster auto").has_value());
  CHECK_FALSE(plan_of_lt_algorithm("cuBLASLt algo 66, tile 64x64, split-K 1, stages undefined, cluster auto").has_value());
  CHECK_FALSE(plan_of_lt_algorithm("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT").has_value());
}

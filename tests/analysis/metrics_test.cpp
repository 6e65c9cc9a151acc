#include <catch2/catch.hpp>

#include "support/simulate.hpp"
#include "tpsim/analysis/metrics.hpp"

using namespace tpsim;
using namespace tpsim::test;

TEST_CASE("Interval unions and uncovered time", "[analysis]") {
  CHECK(union_length({{0, 10}, {5, 15}, {20, 30}}) == 25);
  CHECK(uncovered_length({{0, 10}}, {{2, 4}, {6, 8}}) == 6);
  CHECK(uncovered_length({{0, 10}}, {{0, 20}}) == 0);
}

TEST_CASE("The baseline's communication is fully exposed and on the critical path", "[analysis]") {
  const auto r = simulate(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 16384, "k": 8192, "n": 3584}, "variants": ["baseline"]})");
  const auto& m = variant(r, "baseline").metrics;
  const auto& cp = m.critical_path;
  REQUIRE(cp.by_kind.count("collective"));
  REQUIRE(cp.by_kind.count("gemm"));
  CHECK(m.exposed_comm == Approx(static_cast<double>(cp.by_kind.at("collective"))).epsilon(0.01));
  // The path accounts for the whole makespan (plus the host time before the first op).
  Tick total = 0;
  for (const auto& [k, t] : cp.by_kind) total += t;
  CHECK(total >= m.makespan);
  CHECK(total <= m.last_end);
  REQUIRE(m.sm_utilization);
  CHECK(*m.sm_utilization > 0.3);
  CHECK(*m.sm_utilization < 1.0);
}

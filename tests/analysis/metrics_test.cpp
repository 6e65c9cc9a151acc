#include "support/catch.hpp"

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

TEST_CASE("A kernel that waits for SMs another stream holds is charged as queued, not as launch", "[analysis]") {
  // Two GEMMs of several full waves each on two streams of one GPU: the second is launched
  // at once but only starts as the first one's blocks drain.
  Dag dag(1);
  const OpId first = dag.add(0, 0, "first", GemmOp{{8192, 8192, 8192, Dtype::bf16}});
  const OpId second = dag.add(0, 1, "second", GemmOp{{8192, 8192, 8192, Dtype::bf16}});
  const Timeline tl = execute(dag, h100());
  const VariantMetrics m = analyze(dag, tl);
  REQUIRE(m.critical_path.ops.back() == second);
  const Tick queued = m.critical_path.by_kind.count("queued") ? m.critical_path.by_kind.at("queued") : 0;
  // Its wait is most of the first GEMM (they share the last wave), and no launch latency is that long.
  CHECK(to_us(queued) > 0.8 * op_us(tl, first));
  CHECK(to_us(m.critical_path.by_kind.at("launch")) < 10);
  CHECK(tl.ops[second].launched < tl.ops[second].start);
  // One GEMM alone queues for nothing.
  Dag alone(1);
  alone.add(0, 0, "only", GemmOp{{8192, 8192, 8192, Dtype::bf16}});
  CHECK(analyze(alone, execute(alone, h100())).critical_path.by_kind.count("queued") == 0);
}

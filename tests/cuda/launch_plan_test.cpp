// The CUDA backend's host side, on the CPU: DAG -> per-rank launch plan.
#include "support/catch.hpp"

#include <map>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/cuda/launch_plan.hpp"
#include "tpsim/io/workload_kinds.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::map<LaunchKind, int> count_kinds(const RankPlan& rp) {
  std::map<LaunchKind, int> c;
  for (const auto& l : rp.launches) ++c[l.kind];
  return c;
}

Dag dag_for(const std::string& variant, int gpus) {
  const Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "allgather_matmul", "m": {}, "k": 4096, "n": 4096}}}})", gpus, 1024 * gpus)), "");
  return build_dag(s, variant);
}

}  // namespace

TEST_CASE("async TP lowers to copy-engine peer copies, cuBLASLt GEMMs, barriers and event wiring", "[cuda]") {
  const Dag dag = dag_for("async_tp", 4);
  const LaunchPlan plan = plan_launches(dag);
  REQUIRE(plan.ranks.size() == 4);
  for (const RankPlan& rp : plan.ranks) {
    const auto c = count_kinds(rp);
    CHECK(c.at(LaunchKind::memcpy_peer) == 3);
    CHECK(c.at(LaunchKind::gemm) == 4);
    CHECK(c.at(LaunchKind::barrier) == 3);
    CHECK(rp.streams == 2);
    CHECK(rp.events == 2);  // fork and join
    // Every wait uses a slot recorded earlier in program order on the same rank.
    std::vector<bool> recorded(static_cast<std::size_t>(rp.events), false);
    for (const Launch& l : rp.launches) {
      if (l.kind == LaunchKind::event_record) recorded[static_cast<std::size_t>(l.event_slot)] = true;
      if (l.kind == LaunchKind::event_wait) CHECK(recorded[static_cast<std::size_t>(l.event_slot)]);
    }
    // Each copy pulls into this rank.
    for (const Launch& l : rp.launches)
      if (l.kind == LaunchKind::memcpy_peer) CHECK_THAT(l.args, Catch::Matchers::EndsWith(fmt::format("to GPU {}", rp.rank)));
  }
}

TEST_CASE("The baseline lowers to one NCCL all-gather per rank in a shared group, then the GEMM", "[cuda]") {
  const LaunchPlan plan = plan_launches(dag_for("baseline", 8));
  for (const RankPlan& rp : plan.ranks) {
    REQUIRE(rp.launches.size() == 2);
    CHECK(rp.launches[0].kind == LaunchKind::nccl_collective);
    CHECK(rp.launches[0].group == plan.ranks[0].launches[0].group);
    CHECK(rp.launches[1].kind == LaunchKind::gemm);
  }
}

TEST_CASE("A group some rank never calls is refused: NCCL would hang", "[cuda]") {
  Dag dag(2);
  dag.add(0, 0, "lonely", BarrierOp{dag.new_group()});
  CHECK_THROWS_WITH(plan_launches(dag), Catch::Matchers::Contains("called by 1 of 2 ranks"));
}

TEST_CASE("Launch plans are JSON with one entry per call", "[cuda]") {
  const Dag dag = dag_for("ring", 2);
  const Json j = launch_plan_json(plan_launches(dag), dag);
  CHECK(j["ranks"].size() == 2);
  CHECK(j["ranks"][0]["launches"].size() == dag.program(0).size());
}

TEST_CASE("NCCL send/recv: every rank receives exactly what its peers send it", "[cuda]") {
  const Dag dag = dag_for("async_tp_nccl", 4);
  const LaunchPlan plan = plan_launches(dag);
  double sent = 0, received = 0;
  int calls = 0;
  for (const RankPlan& rp : plan.ranks)
    for (const Launch& l : rp.launches) {
      if (l.kind != LaunchKind::nccl_sendrecv) continue;
      ++calls;
      for (const auto& t : std::get<SendRecvOp>(dag.op(l.op).payload).sends) sent += t.bytes;
      for (const auto& t : l.recvs) {
        received += t.bytes;
        CHECK(t.peer != rp.rank);
      }
    }
  CHECK(calls > 0);
  CHECK(sent > 0);
  CHECK(received == sent);
}

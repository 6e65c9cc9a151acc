// The CUDA backend's host side, on the CPU: DAG -> per-rank launch plan.
#include "support/catch.hpp"

#include <map>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/cuda/launch_plan.hpp"
#include "tpsim/io/workload_kinds.hpp"
#include "tpsim/strategies/registry.hpp"

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
  CHECK_THROWS_WITH(plan_launches(dag), Catch::Matchers::Contains("called by 1 of the 2 ranks"));
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

namespace {

Scenario layer_scenario(int gpus) {
  return parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "model": "llama3_8b", "tokens": 8192, "seq_len": 8192, "pass": "forward_backward"}}}})",
                                                gpus)),
                        "");
}

}  // namespace

TEST_CASE("Two TP groups in one DAG lower to calls in their own communicators, peers named by communicator rank", "[cuda][process_group]") {
  Dag dag(8);
  const int low = dag.add_process_group({0, 1, 2, 3}), high = dag.add_process_group({7, 6, 5, 4});  // high: a reversed ring
  for (const int pg : {low, high}) add_layers(dag, pg, layer_scenario(4), "async_tp_nccl");
  const LaunchPlan plan = plan_launches(dag);
  REQUIRE(plan.process_groups.size() == 3);
  CHECK_FALSE(plan.uses_nccl[Dag::kWorld]);
  CHECK(plan.uses_nccl[static_cast<std::size_t>(low)]);
  CHECK(plan.uses_nccl[static_cast<std::size_t>(high)]);
  int sendrecvs = 0;
  for (const RankPlan& rp : plan.ranks)
    for (const Launch& l : rp.launches) {
      if (l.group < 0) continue;
      // Every rendezvous stays in the rank's own half.
      CHECK(l.process_group == (rp.rank < 4 ? low : high));
      if (l.kind != LaunchKind::nccl_sendrecv) continue;
      ++sendrecvs;
      for (const auto& t : std::get<SendRecvOp>(dag.op(l.op).payload).sends) CHECK((t.peer < 4) == (rp.rank < 4));
    }
  CHECK(sendrecvs > 0);
  // NCCL ranks are ring positions: GPU 7 is rank 0 of the reversed ring, GPU 4 rank 3.
  CHECK(communicator_rank(plan, high, 7) == 0);
  CHECK(communicator_rank(plan, high, 4) == 3);
  CHECK(communicator_rank(plan, low, 2) == 2);
  CHECK_THROWS_WITH(communicator_rank(plan, low, 5), Catch::Matchers::Contains("not a member of process group 1"));
  const std::string text = format_launch_plan(plan, dag);
  CHECK_THAT(text, Catch::Matchers::Contains("process group 2: ranks 7 6 5 4 (NCCL communicator split from the world's)"));
  CHECK_THAT(text, Catch::Matchers::Contains("of process group 2"));
  const Json j = launch_plan_json(plan, dag);
  CHECK(j["process_groups"][2] == Json::array({7, 6, 5, 4}));
}

TEST_CASE("A group called by every member of its process group, and by no one else, plans", "[cuda][process_group]") {
  Dag dag(4);
  const int pair = dag.add_process_group({1, 3});
  const int g = dag.new_group(pair);
  dag.add(1, 0, "ag", CollectiveOp{CollectiveKind::all_gather, 1 << 20, g});
  SECTION("all members") {
    dag.add(3, 0, "ag", CollectiveOp{CollectiveKind::all_gather, 1 << 20, g});
    const LaunchPlan plan = plan_launches(dag);
    CHECK(plan.ranks[0].launches.empty());
    CHECK(plan.ranks[3].launches.front().process_group == pair);
  }
  SECTION("one member missing") {
    CHECK_THROWS_WITH(plan_launches(dag), Catch::Matchers::Contains("called by 1 of the 2 ranks of its process group"));
  }
}

TEST_CASE("Members that reach a communicator's calls in different orders are refused, and barriers order apart from NCCL calls",
          "[cuda][process_group]") {
  Dag dag(2);
  const int a = dag.new_group(), b = dag.new_group();
  SECTION("two all-gathers swapped on rank 1") {
    dag.add(0, 0, "first", CollectiveOp{CollectiveKind::all_gather, 1 << 20, a});
    dag.add(0, 0, "second", CollectiveOp{CollectiveKind::all_gather, 1 << 20, b});
    dag.add(1, 0, "second", CollectiveOp{CollectiveKind::all_gather, 1 << 20, b});
    dag.add(1, 0, "first", CollectiveOp{CollectiveKind::all_gather, 1 << 20, a});
    CHECK_THROWS_WITH(plan_launches(dag), Catch::Matchers::Contains("rank 1 reaches its NCCL calls in another order than rank 0"));
  }
  SECTION("two barriers swapped on rank 1") {
    dag.add(0, 0, "first", BarrierOp{a});
    dag.add(0, 1, "second", BarrierOp{b});
    dag.add(1, 1, "second", BarrierOp{b});
    dag.add(1, 0, "first", BarrierOp{a});
    CHECK_THROWS_WITH(plan_launches(dag), Catch::Matchers::Contains("reaches its barriers in another order"));
  }
  SECTION("a barrier and an all-gather swapped: each mechanism keeps its own order") {
    dag.add(0, 0, "barrier", BarrierOp{a});
    dag.add(0, 1, "gather", CollectiveOp{CollectiveKind::all_gather, 1 << 20, b});
    dag.add(1, 1, "gather", CollectiveOp{CollectiveKind::all_gather, 1 << 20, b});
    dag.add(1, 0, "barrier", BarrierOp{a});
    CHECK_NOTHROW(plan_launches(dag));
  }
}

TEST_CASE("Every TP variant's layer forward+backward lowers to a plan", "[cuda]") {
  const Scenario s = layer_scenario(4);
  for (const std::string& variant : tp_variants(RegionKind::gather)) {
    INFO(variant);
    const Dag dag = build_dag(s, variant);
    CHECK_NOTHROW(plan_launches(dag));
  }
}

TEST_CASE("One rank of a group emulated on one GPU lowers to one rank's plan: local copies, no peer copy, G GEMMs, 2G barriers",
          "[cuda][emulation]") {
  const Scenario s = parse_scenario(Json::parse(R"({"hardware": "h100_sxm", "gpus": 1, "dtype": "bf16",
      "workload": {"op": "matmul_reducescatter", "m": 1024, "k": 14336, "n": 4096, "emulated_group": 8}})"), "");
  const LaunchPlan plan = plan_launches(build_dag(s, "async_tp"));
  REQUIRE(plan.ranks.size() == 1);
  const auto c = count_kinds(plan.ranks[0]);
  CHECK(c.count(LaunchKind::memcpy_peer) == 0);
  CHECK(c.at(LaunchKind::gemm) == 8);
  CHECK(c.at(LaunchKind::barrier) == 16);
  CHECK(plan.ranks[0].streams == 2);
}

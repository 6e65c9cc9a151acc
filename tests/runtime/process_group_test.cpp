// Process groups: several groups of ranks in one DAG, each meeting only its own
// members, in its own ring order, sharing only the hardware they really share.
#include "support/catch.hpp"

#include <numeric>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/analysis/metrics.hpp"
#include "tpsim/strategies/registry.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

Scenario region_scenario(int gpus, const std::string& hardware = "h100_sxm", std::int64_t m = 16384) {
  return parse_scenario(Json::parse(fmt::format(R"({{"hardware": "{}", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "allgather_matmul", "m": {}, "k": 8192, "n": 3584}}}})", hardware, gpus, m)), "");
}

std::vector<int> iota_ranks(int from, int count) {
  std::vector<int> r(static_cast<std::size_t>(count));
  std::iota(r.begin(), r.end(), from);
  return r;
}

// Device time from the first op's start to the last op's end on the given ranks.
Tick span_on(const Dag& dag, const Timeline& tl, const std::vector<int>& ranks) {
  Tick first = kTickMax, last = 0;
  for (int r : ranks)
    for (OpId id : dag.program(r)) {
      first = std::min(first, tl.ops[id].start);
      last = std::max(last, tl.ops[id].end);
    }
  return last - first;
}

}  // namespace

TEST_CASE("A process group lists distinct ranks of its DAG, and only members meet at its rendezvous", "[dag][process_group]") {
  Dag dag(4);
  CHECK(dag.process_groups() == 1);
  CHECK(dag.process_group(Dag::kWorld).ranks == std::vector<int>{0, 1, 2, 3});
  CHECK_THROWS_AS(dag.add_process_group({0, 4}), std::logic_error);
  CHECK_THROWS_AS(dag.add_process_group({1, 1}), std::logic_error);
  CHECK_THROWS_AS(dag.new_group(7), std::logic_error);
  const int pair = dag.add_process_group({2, 0});
  CHECK(dag.process_group(pair).rank(1) == 0);
  CHECK(dag.process_group(pair).rank(2) == 2);  // ring order wraps
  CHECK(dag.process_group(pair).index_of(1) == -1);
  const int g = dag.new_group(pair);
  CHECK(dag.process_group_id_of(g) == pair);
  CHECK_THROWS_AS(dag.add(1, 0, "outsider", BarrierOp{g}), std::logic_error);
  const int p2p = dag.new_group(pair);
  CHECK_THROWS_AS(dag.add(0, 1, "send outside", SendRecvOp{{Transfer{3, 1e6}}, p2p}), std::logic_error);
  CHECK(dag.size() == 0);  // the refused ops left nothing behind
  dag.add(0, 0, "member", BarrierOp{g});
  dag.add(2, 0, "member", BarrierOp{g});
  // Ranks 1 and 3 have nothing to do; the pair's barrier completes with its two members.
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[1].end > 0);
}

TEST_CASE("Two TP groups on their own GPUs of one NVSwitch node run exactly as each alone", "[runtime][process_group]") {
  // Every resource a group uses (its GPUs' SMs, HBM and NVSwitch ports) is its own.
  const Scenario s = region_scenario(4);
  for (const std::string variant : {"baseline", "async_tp", "async_tp_nccl", "ring", "fused"}) {
    INFO(variant);
    const Dag alone = build_region_dag(s, variant, RegionKind::gather);
    const Tick alone_span = analyze(alone, execute(alone, h100())).makespan;
    Dag both(8);
    const int low = both.add_process_group(iota_ranks(0, 4)), high = both.add_process_group(iota_ranks(4, 4));
    add_region(both, low, s, variant, RegionKind::gather);
    add_region(both, high, s, variant, RegionKind::gather);
    const Timeline tl = execute(both, h100());
    CHECK(span_on(both, tl, iota_ranks(0, 4)) == alone_span);
    CHECK(span_on(both, tl, iota_ranks(4, 4)) == alone_span);
  }
}

TEST_CASE("A group's collectives follow its ring order: a ring that skips neighbours is slower on a ring fabric", "[runtime][process_group]") {
  HardwareSpec ring = h100();
  ring.fabric.topology = "ring";  // NVLink only between neighbours 0-1-2-3-0
  ring.fabric.gpus_per_node = 4;
  const Scenario s = region_scenario(4);
  const auto collective_time = [&](std::vector<int> order) {
    Dag dag(4);
    add_region(dag, dag.add_process_group(std::move(order)), s, "baseline", RegionKind::gather);
    const Timeline tl = execute(dag, ring);
    return tl.ops[0].end - tl.ops[0].start;  // rank 0's all-gather
  };
  const Tick neighbours = collective_time({0, 1, 2, 3});
  const Tick skipping = collective_time({0, 2, 1, 3});  // 0->2 and 1->3 take two links each
  CHECK(collective_time({1, 2, 3, 0}) == neighbours);  // the same ring from another start
  CHECK(skipping > neighbours);
  // In world order the group is the DAG's own ring.
  Dag world(4);
  add_region(world, Dag::kWorld, s, "baseline", RegionKind::gather);
  const Timeline tl = execute(world, ring);
  CHECK(tl.ops[0].end - tl.ops[0].start == neighbours);
}

TEST_CASE("Two TP groups across the same two nodes cross through their own GPUs' NICs: as fast as alone", "[runtime][process_group]") {
  const HardwareSpec& two_nodes = load_hardware_file(models_dir() + "/h100_sxm_2node.json");
  const int per = two_nodes.fabric.gpus_per_node;
  // Each group holds half of each node. NCCL's channels leave a node from the group's own
  // members, each through its GPU's NIC, so disjoint groups share no NIC and no NVLink port.
  std::vector<int> a = iota_ranks(0, per / 2), b = iota_ranks(per / 2, per / 2);
  for (int r : iota_ranks(per, per / 2)) a.push_back(r);
  for (int r : iota_ranks(per + per / 2, per / 2)) b.push_back(r);
  const Scenario s = region_scenario(per, "h100_sxm_2node", 65536);
  const auto all_gather_time = [&](bool both, const std::vector<int>& first) {
    Dag dag(2 * per);
    const int ga = dag.add_process_group(first), gb = dag.add_process_group(b);
    add_region(dag, ga, s, "baseline", RegionKind::gather);
    if (both) add_region(dag, gb, s, "baseline", RegionKind::gather);
    const Timeline tl = execute(dag, two_nodes);
    return tl.ops[dag.program(first.front()).front()].end - tl.ops[dag.program(first.front()).front()].start;
  };
  CHECK(all_gather_time(true, a) == all_gather_time(false, a));
  // Four NICs a node carry the crossing slower than the same eight GPUs' NVLink ports in one node.
  CHECK(all_gather_time(false, a) > all_gather_time(false, iota_ranks(0, per)));
}

TEST_CASE("Layers on a sub-group place every op on the group's GPUs", "[strategies][process_group]") {
  const Scenario s = parse_scenario(Json::parse(R"({"hardware": "h100_sxm", "gpus": 4, "dtype": "bf16",
      "workload": {"op": "transformer_layer", "model": "llama3_8b", "tokens": 8192, "seq_len": 8192}})"), "");
  const Dag alone = build_layer_dag(s, "async_tp");
  Dag dag(8);
  const int upper = dag.add_process_group({4, 5, 6, 7});
  add_layers(dag, upper, s, "async_tp");
  CHECK(dag.size() == alone.size());
  for (int r = 0; r < 4; ++r) CHECK(dag.program(r).empty());
  for (int r = 4; r < 8; ++r) CHECK(dag.program(r).size() == alone.program(r - 4).size());
  CHECK(analyze(dag, execute(dag, h100())).makespan == analyze(alone, execute(alone, h100())).makespan);
}

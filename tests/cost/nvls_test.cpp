#include "support/catch.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <tuple>

#include <unistd.h>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/cost/nccl_cost.hpp"
#include "tpsim/step/group_collective.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

const double kLink = h100().fabric.nvlink.bytes_per_ps;

HardwareSpec without_nvls(HardwareSpec hw) {
  hw.nccl.nvls = {};
  return hw;
}

// One all-reduce of `bytes` over `n` GPUs of one node, simulated: its device time in us
// and the detail the trace shows for it.
std::pair<double, std::string> all_reduce(const HardwareSpec& hw, int n, double bytes) {
  Dag dag(n);
  const int g = dag.new_group();
  for (int r = 0; r < n; ++r) dag.add(r, 0, "ar", CollectiveOp{CollectiveKind::all_reduce, bytes, g});
  const Timeline tl = execute(dag, hw);
  return {op_us(tl, 0), tl.detail(0)};
}

}  // namespace

TEST_CASE("NVLS is an all-reduce inside one NVSwitch node, on hardware that has it", "[cost][nccl][nvls]") {
  REQUIRE(h100().nccl.nvls.present());
  CHECK(nvls_applies(CollectiveKind::all_reduce, 8, true, h100()));
  CHECK_FALSE(nvls_applies(CollectiveKind::reduce_scatter, 8, true, h100()));
  CHECK_FALSE(nvls_applies(CollectiveKind::all_gather, 8, true, h100()));
  CHECK_FALSE(nvls_applies(CollectiveKind::all_reduce, 8, false, h100()));
  CHECK_FALSE(nvls_applies(CollectiveKind::all_reduce, 1, true, h100()));
  // NCCL (2.19 to 2.28.7) sets NVLS up only for communicators of more than 2 GPUs.
  CHECK_FALSE(nvls_applies(CollectiveKind::all_reduce, 2, true, h100()));
  CHECK(nvls_applies(CollectiveKind::all_reduce, 3, true, h100()));
  // A100's NVSwitch has no SHARP; a bridged PCIe pair has no switch at all.
  CHECK_FALSE(load_hardware_file(models_dir() + "/a100_sxm.json").nccl.nvls.present());
  CHECK_FALSE(load_hardware_file(models_dir() + "/h100_pcie.json").nccl.nvls.present());
  CHECK(load_hardware_file(models_dir() + "/b200.json").nccl.nvls.present());
}

TEST_CASE("Each port carries (n+1)/n of an NVLS all-reduce's buffer, against a ring's 2(n-1)/n", "[cost][nccl][nvls]") {
  for (int n : {2, 4, 8}) {
    INFO(n);
    const CollectivePlan nvls = plan_nvls(1e9, n, h100());
    CHECK(nvls.algorithm == NcclAlgorithm::nvls);
    CHECK(nvls.bytes_per_rank == Approx(1e9 * (n + 1) / n));
    CHECK(nvls.channels == h100().nccl.nvls.channels);
    CHECK(plan_ring(CollectiveKind::all_reduce, 1e9, n, h100(), kLink).bytes_per_rank == Approx(2e9 * (n - 1) / n));
  }
}

TEST_CASE("NCCL keeps a low-latency ring for small all-reduces and takes NVLS for large ones", "[cost][nccl][nvls]") {
  const CollectivePlan small = plan_collective(CollectiveKind::all_reduce, 32e3, 8, true, h100(), kLink);
  CHECK(small.algorithm == NcclAlgorithm::ring);
  CHECK(small.protocol->name == "LL");
  CHECK(plan_collective(CollectiveKind::all_reduce, 1e9, 8, true, h100(), kLink).algorithm == NcclAlgorithm::nvls);
  // Across nodes, or without NVLS, the same message stays on a ring.
  CHECK(plan_collective(CollectiveKind::all_reduce, 1e9, 8, false, h100(), kLink).algorithm == NcclAlgorithm::ring);
  CHECK(plan_collective(CollectiveKind::all_reduce, 1e9, 8, true, without_nvls(h100()), kLink).algorithm == NcclAlgorithm::ring);
}

TEST_CASE("Simulated, a large NVLS all-reduce beats the ring by the ratio of bytes per port and of efficiencies", "[cost][nccl][nvls]") {
  const double bytes = 2e9;
  for (int n : {4, 8}) {
    INFO(n);
    const auto [nvls_us, nvls_detail] = all_reduce(h100(), n, bytes);
    // The ring on its links alone (over 4 GPUs its blocks' processing would bind first).
    HardwareSpec links_only = without_nvls(h100());
    links_only.nccl.channel_copy_bytes_per_ps = links_only.nccl.channel_reduce_bytes_per_ps = 0;
    const auto [ring_us, ring_detail] = all_reduce(links_only, n, bytes);
    CHECK(nvls_detail.starts_with("nvls Simple, 16 channels"));
    CHECK(ring_detail.starts_with("ring Simple"));
    const CollectivePlan nvls = plan_nvls(bytes, n, h100());
    const CollectivePlan ring = plan_ring(CollectiveKind::all_reduce, bytes, n, h100(), kLink);
    const double nvls_wire = nvls_us - to_us(nvls.latency), ring_wire = ring_us - to_us(ring.latency);
    const double expected = (2.0 * (n - 1) / ring.efficiency) / ((n + 1.0) / nvls.efficiency);
    CHECK(ring_wire / nvls_wire == Approx(expected).epsilon(0.01));
    // Bytes over time: the port rate NCCL's NVLS efficiency leaves.
    CHECK(nvls.bytes_per_rank / (nvls_wire * 1e6) == Approx(kLink * nvls.efficiency).epsilon(0.01));
  }
}

TEST_CASE("An NVLS all-reduce's wire time halves when the NVLink port doubles", "[cost][nccl][nvls]") {
  HardwareSpec fast = h100();
  fast.fabric.nvlink.bytes_per_ps *= 2;
  const double bytes = 4e9, latency = to_us(plan_nvls(bytes, 8, h100()).latency);
  CHECK((all_reduce(fast, 8, bytes).first - latency) / (all_reduce(h100(), 8, bytes).first - latency) ==
        Approx(0.5).epsilon(0.01));
}

TEST_CASE("A group across two NVLS nodes all-reduces by NCCL's NVLS tree, one inside a node by NVLS", "[cost][nccl][nvls]") {
  const HardwareSpec two = load_hardware_file(models_dir() + "/h100_sxm_2node.json");
  REQUIRE(two.nccl.nvls.present());
  const auto run = [](const HardwareSpec& hw) {
    Dag dag(16);
    const int across = dag.new_group();
    const int inside = dag.new_group(dag.add_process_group({0, 1, 2, 3, 4, 5, 6, 7}));
    for (int r = 0; r < 16; ++r) dag.add(r, 0, "across", CollectiveOp{CollectiveKind::all_reduce, 1e9, across});
    std::vector<OpId> in;
    for (int r = 0; r < 8; ++r) in.push_back(dag.add(r, 0, "inside", CollectiveOp{CollectiveKind::all_reduce, 1e9, inside}));
    const Timeline tl = execute(dag, hw);
    return std::make_tuple(tl.detail(0), tl.detail(in.front()), op_us(tl, 0));
  };
  const auto [across, inside, tree_us] = run(two);
  CHECK(across.starts_with("nvls_tree "));
  CHECK(inside.starts_with("nvls "));
  // Two nodes: each GPU's NIC carries an eighth of the buffer each way, against a ring's
  // 2(n-1)/n over the node's eight NICs: the tree takes well under the ring's time.
  const auto [ring_detail, ignored, ring_us] = run(without_nvls(two));
  CHECK(ring_detail.starts_with("ring "));
  CHECK(tree_us < 0.75 * ring_us);
  // As the step model prices it (latency + the slower tier), within the fabric's sharing.
  GroupLayout g;
  g.ranks = 16, g.per_node = 8, g.nodes = 2;
  const double step_us = to_us(group_collective_cost(GroupOp::all_reduce, 1e9, g, two).time);
  CHECK(tree_us == Approx(step_us).epsilon(0.1));
}

TEST_CASE("Training-step all-reduces inside a node take NVLS, those across nodes and other collectives do not", "[step][collective][nvls]") {
  GroupLayout node;
  node.ranks = node.per_node = 8;
  const HardwareSpec hw = load_hardware_file(models_dir() + "/h100_sxm_llama3_cluster.json");
  const GroupCollectiveCost nvls = group_collective_cost(GroupOp::all_reduce, 1e9, node, hw);
  CHECK(nvls.algorithm == "nvls");
  CHECK(nvls.channels == hw.nccl.nvls.channels);
  CHECK(nvls.wire_bytes == Approx(1e9 * 9 / 8));
  const GroupCollectiveCost ring = group_collective_cost(GroupOp::all_reduce, 1e9, node, without_nvls(hw));
  CHECK(ring.algorithm == "ring");
  CHECK(nvls.time < ring.time);
  CHECK(group_collective_cost(GroupOp::reduce_scatter, 1e9, node, hw).algorithm == "ring");
  GroupLayout spread;
  spread.ranks = 16;
  spread.per_node = 8;
  spread.nodes = 2;
  CHECK(group_collective_cost(GroupOp::all_reduce, 1e9, spread, hw).algorithm != "nvls");
}

TEST_CASE("software.nccl_nvls false stands for NCCL_NVLS_ENABLE=0", "[io][nvls]") {
  const std::string base = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "matmul_allreduce", "m": 8192, "k": 1024, "n": 8192})";
  CHECK(parse_scenario(Json::parse(base + "}"), "").hardware.nccl.nvls.present());
  CHECK_FALSE(parse_scenario(Json::parse(base + R"(, "software": {"nccl_nvls": false}})"), "").hardware.nccl.nvls.present());
  CHECK(scenario_error(base + R"(, "software": {"nccl_nvls": "no"}})").find("$.software.nccl_nvls") != std::string::npos);
  // All-reduced by NVLS, the layer is faster than on rings.
  CHECK(makespan_us(simulate(base + "}"), "baseline") < makespan_us(simulate(base + R"(, "software": {"nccl_nvls": false}})"), "baseline"));
}

TEST_CASE("A model derived from an NVSwitch part onto a ring of links has no NVLS", "[io][nvls]") {
  const auto file = std::filesystem::temp_directory_path() / fmt::format("tpsim_test_nvls_ring_{}.json", ::getpid());
  std::ofstream(file) << R"({"base": "h100_sxm", "name": "ring", "fabric": {"topology": "ring"}})";
  const HardwareSpec ring = load_hardware_file(file.string());
  std::filesystem::remove(file);
  CHECK_FALSE(ring.nccl.nvls.present());
}

namespace {

GroupLayout across_nodes(int per_node, int nodes) {
  GroupLayout g;
  g.ranks = per_node * nodes;
  g.per_node = per_node;
  g.nodes = nodes;
  return g;
}

}  // namespace

TEST_CASE("Training-step all-reduces across NVLS nodes take NCCL's NVLS tree when it is fastest", "[step][collective][nvls]") {
  const HardwareSpec hw = load_hardware_file(models_dir() + "/h100_sxm_llama3_cluster.json");
  const GroupCollectiveCost two = group_collective_cost(GroupOp::all_reduce, 4e9, across_nodes(8, 2), hw);
  CHECK(two.algorithm == "nvls_tree");
  CHECK(two.protocol == "Simple");
  CHECK(two.channels == hw.nccl.nvls.channels);
  CHECK(two.tier == LinkTier::nic);
  // Two nodes: each member's NIC carries its eighth once each way, against a ring's
  // 2(n-1)/n of the buffer over the node's eight NICs: about half the ring's time.
  CHECK(two.wire_bytes == Approx(4e9 / 8));
  const GroupCollectiveCost ring = group_collective_cost(GroupOp::all_reduce, 4e9, across_nodes(8, 2), without_nvls(hw));
  CHECK(ring.algorithm == "ring");
  CHECK(static_cast<double>(two.time) < 0.75 * static_cast<double>(ring.time));
  // Without NVLS, with one member per node (nothing for the switch to reduce), or for
  // other collectives, there is no NVLS tree.
  CHECK(group_collective_cost(GroupOp::all_reduce, 4e9, across_nodes(1, 16), hw).algorithm != "nvls_tree");
  CHECK(group_collective_cost(GroupOp::reduce_scatter, 4e9, across_nodes(8, 2), hw).algorithm == "ring");
}

TEST_CASE("The NVLS tree's NIC bytes double past two nodes and its latency grows by two network levels per doubling",
          "[cost][nccl][nvls]") {
  const HardwareSpec hw = load_hardware_file(models_dir() + "/h100_sxm_llama3_cluster.json");
  const double nic = hw.cluster.nic.bytes_per_ps;
  CHECK(nvls_tree_nic_bytes(8e9, 8, 2) == Approx(1e9));
  CHECK(nvls_tree_nic_bytes(8e9, 8, 4) == Approx(2e9));
  CHECK(nvls_tree_nic_bytes(8e9, 8, 64) == Approx(2e9));
  CHECK(nvls_tree_nic_bytes(8e9, 4, 4) == Approx(4e9));  // fewer members per node: larger slices per NIC
  // A tiny buffer is all latency: 8 -> 16 -> 64 nodes add 2 and then 4 network levels (up and down).
  const Tick step = hw.cluster.latency_for("Simple")->nvls_tree_step;
  REQUIRE(step > 0);
  const auto tiny = [&](int nodes) { return nvls_tree_estimate(64, 8, nodes, hw, nic); };
  CHECK(tiny(16) - tiny(8) == 2 * step);
  CHECK(tiny(64) - tiny(16) == 4 * step);
  // A large one is bandwidth-bound by the slower tier: past two nodes here the NICs.
  const Tick big = nvls_tree_estimate(16e9, 8, 8, hw, nic), bigger = nvls_tree_estimate(32e9, 8, 8, hw, nic);
  CHECK(static_cast<double>(bigger) / static_cast<double>(big) == Approx(2.0).epsilon(0.01));
}

TEST_CASE("A cluster model with NVLS names the NVLS tree's network latency", "[io][nvls]") {
  const auto file = std::filesystem::temp_directory_path() / fmt::format("tpsim_test_nvls_tree_{}.json", ::getpid());
  const auto load_with = [&](const std::function<void(Json&)>& edit) {
    Json hw = Json::parse(std::ifstream(models_dir() + "/h100_sxm.json"));
    edit(hw["cluster"]["nccl_net_latency"]);
    std::ofstream(file) << hw.dump();
    std::string error = "no error";
    try {
      load_hardware_file(file.string());
    } catch (const InputError& e) {
      error = e.what();
    }
    std::filesystem::remove(file);
    return error;
  };
  CHECK_THAT(load_with([](Json& lat) { lat["Simple"].erase("nvls_tree"); }),
             Catch::Matchers::Contains("$.cluster.nccl_net_latency.Simple: needs \"nvls_tree\""));
  CHECK_THAT(load_with([](Json& lat) { lat["LL"]["nvls_tree"] = lat["Simple"]["nvls_tree"]; }),
             Catch::Matchers::Contains("unknown key \"nvls_tree\""));
  CHECK(load_with([](Json&) {}) == "no error");
}

#include "support/catch.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

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
    const auto [ring_us, ring_detail] = all_reduce(without_nvls(h100()), n, bytes);
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

TEST_CASE("A group across two nodes all-reduces on a ring even where each node has NVLS", "[cost][nccl][nvls]") {
  const HardwareSpec two = load_hardware_file(models_dir() + "/h100_sxm_2node.json");
  REQUIRE(two.nccl.nvls.present());
  Dag dag(16);
  const int across = dag.new_group();
  const int inside = dag.new_group(dag.add_process_group({0, 1, 2, 3, 4, 5, 6, 7}));
  for (int r = 0; r < 16; ++r) dag.add(r, 0, "across", CollectiveOp{CollectiveKind::all_reduce, 1e9, across});
  std::vector<OpId> in;
  for (int r = 0; r < 8; ++r) in.push_back(dag.add(r, 0, "inside", CollectiveOp{CollectiveKind::all_reduce, 1e9, inside}));
  const Timeline tl = execute(dag, two);
  CHECK(tl.detail(0).starts_with("ring "));
  CHECK(tl.detail(in.front()).starts_with("nvls "));
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

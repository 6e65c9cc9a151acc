// NCCL's CollNet: all-reduces across nodes reduced in the switches (SHARP), where a
// scenario turns it on (NCCL_COLLNET_ENABLE; off by default).
#include "support/catch.hpp"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <unistd.h>

#include "support/simulate.hpp"
#include "tpsim/step/group_collective.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

HardwareSpec with_collnet(bool nvls) {
  HardwareSpec hw = h100();
  REQUIRE(hw.cluster.sharp.available());
  hw.cluster.sharp.enabled = true;
  if (!nvls) hw.nccl.nvls = {};
  return hw;
}

double ms(const GroupCollectiveCost& c) { return static_cast<double>(c.time) * 1e-9; }

}  // namespace

TEST_CASE("CollNet sends each slice through the NICs once: half a ring's network bytes", "[step][collnet]") {
  // One GPU per node over 64 nodes: a ring moves 2(n-1)/n of the buffer through each NIC,
  // the switches' reduction the buffer once up and once down (each direction of the NIC once).
  const GroupLayout g{64, 1, 64, 2};
  const double big = 8e9, bigger = 16e9;
  const HardwareSpec hw = with_collnet(false);
  const auto collnet = group_collective_cost(GroupOp::all_reduce, big, g, hw);
  const auto ring = group_collective_cost(GroupOp::all_reduce, big, g, h100());
  CHECK(collnet.algorithm == "collnet_direct");
  CHECK(ring.algorithm == "ring");
  CHECK(collnet.wire_bytes == Approx(big));
  // Bandwidth terms (the time 8 GB more adds): the ring's is 2(n-1)/n times CollNet's.
  const double collnet_bw = ms(group_collective_cost(GroupOp::all_reduce, bigger, g, hw)) - ms(collnet);
  const double ring_bw = ms(group_collective_cost(GroupOp::all_reduce, bigger, g, h100())) - ms(ring);
  CHECK(ring_bw / collnet_bw == Approx(2.0 * 63 / 64).epsilon(0.01));
  // Off unless the scenario asks for it, as NCCL_COLLNET_ENABLE is.
  CHECK_FALSE(h100().cluster.sharp.present());
}

TEST_CASE("CollNet's latency does not grow with the nodes, a ring's does", "[step][collnet]") {
  const HardwareSpec hw = with_collnet(false);
  const auto small = [&](int nodes, const HardwareSpec& h) {
    return group_collective_cost(GroupOp::all_reduce, 1e6, GroupLayout{nodes, 1, nodes, 1}, h);
  };
  CHECK(small(512, hw).algorithm == "collnet_direct");
  CHECK(small(512, hw).time == small(16, hw).time);
  CHECK(small(512, hw).time < small(512, h100()).time);
}

TEST_CASE("With NVLS in the nodes NCCL's CollNet lets the NVSwitch reduce each node's share first", "[step][collnet]") {
  // 8 per node: each member's NIC carries 1/8 of the buffer each way, the switch inside the node
  // the rest, as NVLS in one node.
  const GroupLayout g{128, 8, 16, 1};
  const double s = 8e9;
  const auto nvls = group_collective_cost(GroupOp::all_reduce, s, g, with_collnet(true));
  const auto direct = group_collective_cost(GroupOp::all_reduce, s, g, with_collnet(false));
  CHECK(nvls.algorithm == "nvls_collnet");
  CHECK(direct.algorithm == "collnet_direct");
  CHECK(nvls.wire_bytes == Approx(s / 8));
  // NVLS moves (p+1)/p of the buffer through each NVLink port where CollNetDirect's direct
  // scatter and gather move 2(p-1)/p.
  CHECK(nvls.time < direct.time);
  CHECK(nvls.time < group_collective_cost(GroupOp::all_reduce, s, g, h100()).time);
}

TEST_CASE("software.nccl_collnet turns CollNet on only where the switches reduce", "[io][collnet]") {
  const auto scenario = [](const std::string& hardware, const std::string& value) {
    return fmt::format(R"({{"hardware": "{}", "gpus": 8, "dtype": "bf16",
        "workload": {{"op": "matmul_allreduce", "m": 8192, "k": 1024, "n": 8192}}, "software": {{"nccl_collnet": {}}}}})",
                       hardware, value);
  };
  CHECK(parse_scenario(Json::parse(scenario("h100_sxm", "true")), "").hardware.cluster.sharp.present());
  CHECK_FALSE(parse_scenario(Json::parse(scenario("h100_sxm", "false")), "").hardware.cluster.sharp.present());
  CHECK(scenario_error(scenario("h100_sxm", "1")).find("$.software.nccl_collnet") != std::string::npos);
  CHECK(scenario_error(scenario("b200", "true")) ==
        "$.software.nccl_collnet: hardware b200 has no in-network reduction between nodes (cluster.sharp)");
  // Meta's RoCE network has none: its file removes its base's with null.
  CHECK(scenario_error(scenario("h100_sxm_llama3_cluster", "true")).find("has no in-network reduction") != std::string::npos);
}

TEST_CASE("A hardware file's SHARP needs its NVLS latency where the nodes have NVLS", "[io][collnet]") {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("tpsim_sharp_{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "h100_no_nvls_latency.json").string();
  std::ofstream(file) << R"({"name": "h100_no_nvls_latency", "base": "h100_sxm",
      "cluster": {"sharp": {"nvls_latency": null}}})";
  std::string error;
  try {
    load_hardware_file(file);
  } catch (const InputError& e) {
    error = e.what();
  }
  std::filesystem::remove_all(dir);
  CHECK(error.find("$.cluster.sharp: needs \"nvls_latency\"") != std::string::npos);
}

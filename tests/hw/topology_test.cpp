#include "support/catch.hpp"

#include "tpsim/hw/fabric.hpp"

using namespace tpsim;

namespace {
FabricSpec spec(const std::string& kind) {
  FabricSpec s;
  s.topology = kind;
  s.nvlink = {0.3, 1000};
  s.pcie = {0.05, 2000};
  s.nic = {0.05, 5000};
  s.gpus_per_node = 4;
  return s;
}
}  // namespace

TEST_CASE("Paired GPUs talk over their bridge, the others over PCIe", "[hw][topology]") {
  const Topology t(spec("pairs"), 4);
  CHECK(t.route_capacity(0, 1) == Approx(0.3));
  CHECK(t.route_capacity(0, 2) == Approx(0.05));
  CHECK(t.route(0, 2).latency == 2000);
  CHECK(t.egress_capacity(0) == Approx(0.35));
}

TEST_CASE("On a ring, far GPUs are reached hop by hop the shorter way", "[hw][topology]") {
  const Topology t(spec("ring"), 8);
  CHECK(t.route(0, 1).resources.size() == 1);
  CHECK(t.route(0, 3).resources.size() == 3);
  CHECK(t.route(0, 6).resources.size() == 2);  // down: 0 -> 7 -> 6
  CHECK(t.route(0, 3).latency == 3000);
  // A two-hop transfer shares its middle link with a one-hop transfer on it.
  Simulator sim;
  Fabric f(sim, Topology(spec("ring"), 8));
  const auto far = f.start(0, 2, 1e6, 0, [] {});
  const auto near = f.start(1, 2, 1e6, 0, [] {});
  sim.schedule_at(2500, [&] {  // both past their route latency
    CHECK(f.rate(far) == Approx(0.15));
    CHECK(f.rate(near) == Approx(0.15));
  });
  sim.run();
}

TEST_CASE("Across nodes, transfers take the NIC, inside a node NVSwitch", "[hw][topology]") {
  const Topology t(spec("multi_node"), 8);
  CHECK(t.route_capacity(0, 3) == Approx(0.3));
  CHECK(t.route_capacity(0, 4) == Approx(0.05));
  CHECK(t.route(3, 4).latency == 5000);
  Simulator sim;
  Fabric f(sim, Topology(spec("multi_node"), 8));
  Tick done = -1;
  f.start(0, 4, 1e6, 0, [&] { done = sim.now(); });
  sim.run();
  CHECK(done == 5000 + duration_for(1e6, 0.05));
}

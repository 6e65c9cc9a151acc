#include "support/catch.hpp"

#include <algorithm>
#include <stdexcept>

#include "tpsim/hw/fabric.hpp"

using namespace tpsim;

namespace {
constexpr double kPort = 0.4;  // bytes/ps = 400 GB/s
Topology nvswitch(int gpus) {
  FabricSpec spec;
  spec.topology = "switch";
  spec.nvlink = {kPort, 0};
  return Topology(spec, gpus);
}
}

TEST_CASE("One transfer alone gets the whole port", "[hw][fabric]") {
  Simulator sim;
  Fabric f(sim, nvswitch(8));
  Tick done = -1;
  f.start(0, 1, 4e6, 0, [&] { done = sim.now(); });
  sim.run();
  CHECK(done == duration_for(4e6, kPort));  // 10 us
}

TEST_CASE("Two copies into one GPU each get half its ingress, and bytes are conserved", "[hw][fabric]") {
  Simulator sim;
  Fabric f(sim, nvswitch(8));
  Tick a = -1, b = -1;
  const auto fa = f.start(1, 0, 4e6, 0, [&] { a = sim.now(); });
  const auto fb = f.start(2, 0, 4e6, 0, [&] { b = sim.now(); });
  sim.schedule_at(0, [&] {  // rates settle once per instant, after every start at it
    CHECK(f.rate(fa) == Approx(kPort / 2));
    CHECK(f.rate(fb) == Approx(kPort / 2));
  });
  sim.run();
  CHECK(a == b);
  CHECK(to_us(a) == Approx(20.0).epsilon(1e-6));  // twice as long as alone
  CHECK(f.bytes_delivered() == f.bytes_started());
  CHECK(f.egress_bytes(1) + f.egress_bytes(2) == Approx(8e6).epsilon(1e-9));
}

TEST_CASE("When one transfer ends the other speeds up (re-timing)", "[hw][fabric]") {
  Simulator sim;
  Fabric f(sim, nvswitch(4));
  Tick small = -1, big = -1;
  f.start(1, 0, 2e6, 0, [&] { small = sim.now(); });
  f.start(2, 0, 6e6, 0, [&] { big = sim.now(); });
  sim.run();
  // Shared until the small one ends (2e6 at 0.2 -> 10 us), then the rest (4e6) at 0.4 -> 10 us more.
  CHECK(to_us(small) == Approx(10.0).epsilon(1e-6));
  CHECK(to_us(big) == Approx(20.0).epsilon(1e-6));
  CHECK(f.egress_bytes(2) == Approx(6e6).epsilon(1e-9));
}

TEST_CASE("Max-min fairness gives a capped flow's unused share to the others", "[hw][fabric]") {
  Simulator sim;
  Fabric f(sim, nvswitch(4));
  const auto capped = f.start(1, 0, 1e6, 0.1, [] {});
  const auto free1 = f.start(2, 0, 1e6, 0, [] {});
  const auto free2 = f.start(3, 0, 1e6, 0, [] {});
  sim.schedule_at(0, [&] {
    CHECK(f.rate(capped) == Approx(0.1));
    CHECK(f.rate(free1) == Approx(0.15));
    CHECK(f.rate(free2) == Approx(0.15));
  });
  sim.run();
  CHECK(f.bytes_delivered() == f.bytes_started());
}

TEST_CASE("Transfers on disjoint ports do not slow each other", "[hw][fabric]") {
  Simulator sim;
  Fabric f(sim, nvswitch(8));
  std::vector<Tick> done;
  for (int g = 0; g < 8; ++g) f.start(g, (g + 1) % 8, 4e6, 0, [&] { done.push_back(sim.now()); });
  sim.run();
  REQUIRE(done.size() == 8);
  for (Tick t : done) CHECK(t == duration_for(4e6, kPort));
}

TEST_CASE("Re-timing touches only transfers that share a link with the one that changed", "[hw][fabric]") {
  Simulator sim;
  Fabric f(sim, nvswitch(8));
  for (int g = 0; g < 8; g += 2) f.start(g, g + 1, 4e6, 0, [] {});  // four disjoint pairs
  sim.schedule_at(0, [&] { CHECK(f.rates_solved() == 4); });         // solved together, once each
  sim.schedule_at(1, [&] { f.start(1, 3, 4e6, 0, [] {}); });          // shares GPU 3's ingress with 2 -> 3
  sim.schedule_at(2, [&] { CHECK(f.rates_solved() == 6); });          // only those two re-solved
  sim.run();
  CHECK(f.bytes_delivered() == f.bytes_started());
}

TEST_CASE("A protocol's overhead is on the wire: a port's flows carry together what one carries alone", "[hw][fabric]") {
  // Payload 0.8 of the bytes on the link: one flow of 7 MB, or seven of 1 MB to seven peers
  // (an all-to-all's sends), leave the port at the same payload rate, 0.8 of it.
  const double share = 0.8;
  Tick alone = -1;
  {
    Simulator sim;
    Fabric f(sim, nvswitch(8));
    f.start(0, 1, 7e6, 0, [&] { alone = sim.now(); }, {share, 1.0});
    sim.run();
  }
  CHECK(alone == duration_for(7e6, kPort * share));
  Simulator sim;
  Fabric f(sim, nvswitch(8));
  Tick last = -1;
  for (int peer = 1; peer < 8; ++peer) f.start(0, peer, 1e6, 0, [&] { last = std::max(last, sim.now()); }, {share, 1.0});
  sim.run();
  CHECK(to_us(last) == Approx(to_us(alone)).epsilon(1e-6));
  CHECK(f.egress_bytes(0) == Approx(7e6).epsilon(1e-9));  // the counters count payload
  // A rate cap (a copy engine) is not overhead: seven capped flows fill the port.
  Simulator sim2;
  Fabric g(sim2, nvswitch(8));
  Tick capped = -1;
  for (int peer = 1; peer < 8; ++peer) g.start(0, peer, 1e6, kPort * share, [&] { capped = std::max(capped, sim2.now()); });
  sim2.run();
  CHECK(to_us(capped) == Approx(to_us(duration_for(7e6, kPort))).epsilon(1e-6));
  CHECK_THROWS_AS(g.start(0, 1, 1e6, 0, [] {}, {0.0, 1.0}), std::logic_error);
  CHECK_THROWS_AS(g.start(0, 1, 1e6, 0, [] {}, {1.0, 1.5}), std::logic_error);
  // The HBM at either end sees the payload only: a slower HBM binds at its own rate.
  FabricSpec spec;
  spec.topology = "switch";
  spec.nvlink = {kPort, 0};
  Simulator sim3;
  Fabric h(sim3, Topology(spec, 2, kPort / 4));
  Tick through_hbm = -1;
  h.start(0, 1, 1e6, 0, [&] { through_hbm = sim3.now(); }, {0.5, 1.0});
  sim3.run();
  CHECK(through_hbm == duration_for(1e6, kPort / 4));
}

TEST_CASE("NVLink and a NIC each carry their own share of a protocol's overhead", "[hw][fabric]") {
  // Two nodes of two GPUs: GPU 0 -> 1 stays on NVLink, GPU 0 -> 2 crosses the NICs.
  FabricSpec spec;
  spec.topology = "multi_node";
  spec.gpus_per_node = 2;
  spec.nvlink = {kPort, 0};
  spec.nic = {kPort / 8, 0};
  const auto alone = [&](int dst, PayloadShare share) {
    Simulator sim;
    Fabric f(sim, Topology(spec, 4));
    Tick done = -1;
    f.start(0, dst, 1e6, 0, [&] { done = sim.now(); }, share);
    sim.run();
    return done;
  };
  // The NVLink share taxes only NVLink; the network share only the NIC.
  CHECK(alone(1, {0.5, 1.0}) == duration_for(1e6, kPort * 0.5));
  CHECK(alone(2, {0.5, 1.0}) == duration_for(1e6, kPort / 8));
  CHECK(alone(2, {1.0, 0.5}) == duration_for(1e6, kPort / 16));
  CHECK(alone(1, {1.0, 0.5}) == duration_for(1e6, kPort));
}

#include "support/catch.hpp"

#include <random>

#include "support/simulate.hpp"
#include "tpsim/step/all_to_all.hpp"

using namespace tpsim;

namespace {

constexpr double kNvlink = 450.0, kNic = 50.0;  // bytes per ps, the ratio of H100's NVLink port to a 400 Gb/s NIC
constexpr double kSent = 1.0e6;

GroupLayout layout(int ranks, int per_node, int leaves = 1) {
  GroupLayout g;
  g.ranks = ranks, g.per_node = per_node, g.nodes = (ranks + per_node - 1) / per_node, g.leaves = leaves;
  return g;
}

AllToAllTraffic even(int n, bool back = false) { return {kSent, std::vector<double>(static_cast<std::size_t>(n), 1.0 / n), back}; }

// Member 0 receives `hot` of every member's bytes; the others share the rest.
AllToAllTraffic hot_member(int n, double hot, bool back) {
  std::vector<double> share(static_cast<std::size_t>(n), (1 - hot) / (n - 1));
  share[0] = hot;
  return {kSent, share, back};
}

}  // namespace

TEST_CASE("an even all-to-all inside a node moves (n-1)/n of each member's bytes over its NVLink port", "[step][all_to_all]") {
  for (int n : {2, 4, 8}) {
    INFO("n = " << n);
    CHECK(all_to_all_transfer_ps(layout(n, n), even(n), kNvlink, kNic, 1) == Approx(kSent * (n - 1) / n / kNvlink));
  }
  // Doubling the NVLink bandwidth halves it.
  CHECK(all_to_all_transfer_ps(layout(8, 8), even(8), 2 * kNvlink, kNic, 1) ==
        Approx(all_to_all_transfer_ps(layout(8, 8), even(8), kNvlink, kNic, 1) / 2));
}

TEST_CASE("an even all-to-all across nodes is paced by the NICs: off-node bytes over one NIC per member", "[step][all_to_all]") {
  for (int nodes : {2, 4, 8}) {
    const int n = 8 * nodes;
    INFO(nodes << " nodes");
    const double off_node = kSent * (n - 8) / n;
    CHECK(all_to_all_transfer_ps(layout(n, 8), even(n), kNvlink, kNic, 1) == Approx(off_node / kNic));
    CHECK(all_to_all_transfer_ps(layout(n, 8), even(n, true), kNvlink, kNic, 1) == Approx(off_node / kNic));
  }
  // One member per node: every piece crosses a NIC.
  CHECK(all_to_all_transfer_ps(layout(4, 1), even(4), kNvlink, kNic, 1) == Approx(kSent * 3 / 4 / kNic));
}

TEST_CASE("a hot receiver's NIC paces the dispatch, and its combine leaves through its node's NICs together", "[step][all_to_all]") {
  // 16 members on two nodes; member 0 receives half of every member's bytes.
  const double dispatch = all_to_all_transfer_ps(layout(16, 8), hot_member(16, 0.5, false), kNvlink, kNic, 1);
  const double combine = all_to_all_transfer_ps(layout(16, 8), hot_member(16, 0.5, true), kNvlink, kNic, 1);
  // The 8 members of the other node send it 0.5 x sent each, through its one NIC.
  CHECK(dispatch == Approx(8 * 0.5 * kSent / kNic));
  // It sends 8 x 0.5 x sent to the other node over its node's 8 NICs, beside its node-mates' small pieces.
  CHECK(combine < dispatch / 4);
  CHECK(combine >= 8 * 0.5 * kSent / (8 * kNic));
  // More heat never speeds either up.
  double last_d = 0, last_c = 0;
  for (double hot : {1.0 / 16, 0.1, 0.2, 0.5, 0.9}) {
    const double d = all_to_all_transfer_ps(layout(16, 8), hot_member(16, hot, false), kNvlink, kNic, 1);
    const double c = all_to_all_transfer_ps(layout(16, 8), hot_member(16, hot, true), kNvlink, kNic, 1);
    CHECK(d >= last_d * (1 - 1e-12));
    CHECK(c >= last_c * (1 - 1e-12));
    last_d = d, last_c = c;
  }
}

TEST_CASE("oversubscribed uplinks pace the pieces that leave a leaf, and the pieces inside it run beside them", "[step][all_to_all]") {
  // 32 members on 4 nodes in 2 leaf units: each member sends half its bytes out of its unit,
  // and its unit's 16 members get 16 x NIC / 4 of uplink.
  const GroupLayout g = layout(32, 8, 2);
  const double off_leaf = kSent * 16 / 32;
  CHECK(all_to_all_transfer_ps(g, even(32), kNvlink, kNic, 4) == Approx(off_leaf * 4 / kNic));
  CHECK(all_to_all_transfer_ps(g, even(32), kNvlink, kNic, 8) == Approx(off_leaf * 8 / kNic));
  // Up to 1:1.5 the uplinks keep up with the NICs: the NICs pace it as if in one unit.
  CHECK(all_to_all_transfer_ps(g, even(32), kNvlink, kNic, 1.5) == Approx(all_to_all_transfer_ps(layout(32, 8), even(32), kNvlink, kNic, 1)));
}

TEST_CASE("an all-to-all is never faster than any member's bytes over its own links", "[step][all_to_all]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 16;
    std::vector<double> share(n);
    double sum = 0;
    for (double& x : share) sum += (x = u(rng));
    for (double& x : share) x /= sum;
    for (bool back : {false, true}) {
      const AllToAllTraffic t{kSent, share, back};
      const double ps = all_to_all_transfer_ps(layout(n, 8), t, kNvlink, kNic, 1);
      double total = 0;
      for (int i = 0; i < n; ++i) {
        double in_node = 0, received_off_node = 0;
        for (int j = 0; j < n; ++j) {
          if (j == i) continue;
          if (j / 8 == i / 8) in_node += t.bytes(i, j);
          else received_off_node += t.bytes(j, i);
          total += t.bytes(i, j);
        }
        CHECK(ps >= in_node / kNvlink * (1 - 1e-9));
        CHECK(ps >= received_off_node / kNic * (1 - 1e-9));
      }
      CHECK(ps <= total / kNic);  // and never slower than every byte through one NIC
    }
  }
}

TEST_CASE("an all-to-all's cost adds NCCL's latency and keeps the protocol's efficiency", "[step][all_to_all]") {
  const HardwareSpec& hw = test::h100();
  const GroupCollectiveCost c = all_to_all_cost(layout(8, 8), even(8), hw);
  CHECK(c.algorithm == "p2p");
  CHECK(c.tier == LinkTier::nvlink);
  CHECK(c.wire_bytes == Approx(kSent * 7 / 8));
  const double links = all_to_all_transfer_ps(layout(8, 8), even(8), hw.fabric.nvlink.bytes_per_ps, 0, 1);
  CHECK(static_cast<double>(c.time) > links);  // efficiency below 1 and a latency
  CHECK(all_to_all_cost(layout(1, 1), even(1), hw).algorithm == "none");
}

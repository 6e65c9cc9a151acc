#include "tpsim/step/all_to_all.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

#include "tpsim/cost/nccl_cost.hpp"
#include "tpsim/cost/p2p_plan.hpp"
#include "tpsim/hw/max_min.hpp"

namespace tpsim {

namespace {

// The links of one group's all-to-all, as resource indices.
struct Links {
  std::vector<double> capacity;
  int add(double c) {
    capacity.push_back(c);
    return static_cast<int>(capacity.size()) - 1;
  }
};

// A bundle of `count` identical pieces: one path, one size each.
struct Bundle {
  std::vector<int> path;
  double count = 1, size = 0, left = 0;  // pieces; bytes per piece, and still to move
};

}  // namespace

double all_to_all_transfer_ps(const GroupLayout& g, const AllToAllTraffic& traffic, double nvlink, double nic,
                              double oversubscription) {
  const int n = g.ranks;
  if (static_cast<int>(traffic.share.size()) != n) throw std::logic_error("all-to-all: one share per member");
  if (n < 2 || traffic.sent_bytes <= 0) return 0;
  const int per_node = std::max(1, std::min(g.per_node, n));
  const int nodes = (n + per_node - 1) / per_node;
  const int leaves = std::clamp(g.leaves, 1, nodes);
  const int nodes_per_leaf = (nodes + leaves - 1) / leaves;
  const auto node_of = [&](int m) { return m / per_node; };
  const auto leaf_of = [&](int node) { return node / nodes_per_leaf; };
  std::vector<int> node_members(static_cast<std::size_t>(nodes), 0), leaf_members(static_cast<std::size_t>(leaves), 0);
  for (int m = 0; m < n; ++m) ++node_members[static_cast<std::size_t>(node_of(m))], ++leaf_members[static_cast<std::size_t>(leaf_of(node_of(m)))];

  Links links;
  std::vector<int> nvl_out, nvl_in, nic_in, node_out, up_out, up_in;
  for (int m = 0; m < n; ++m) nvl_out.push_back(links.add(nvlink)), nvl_in.push_back(links.add(nvlink)), nic_in.push_back(links.add(nic));
  for (int a = 0; a < nodes; ++a) node_out.push_back(links.add(node_members[static_cast<std::size_t>(a)] * nic));
  const bool uplinks = leaves > 1 && oversubscription > 1;
  if (uplinks)
    for (int l = 0; l < leaves; ++l) {
      const double c = leaf_members[static_cast<std::size_t>(l)] * nic / oversubscription;
      up_out.push_back(links.add(c)), up_in.push_back(links.add(c));
    }

  // What travels, member to member, on NVLink inside a node or across the network, in the
  // order first addressed (the solve does not depend on it; the output's last bits might).
  struct Piece {
    bool network;
    int from, to;
    double bytes;
  };
  std::vector<Piece> pieces;
  std::map<std::tuple<bool, int, int>, std::size_t> piece_at;
  const auto put = [&](bool network, int from, int to, double b) {
    const auto [it, fresh] = piece_at.try_emplace({network, from, to}, pieces.size());
    if (fresh)
      pieces.push_back({network, from, to, b});
    else
      pieces[it->second].bytes += b;
  };
  // The member of `node` at the same in-node index as member `like`.
  const auto peer_in = [&](int node, int like) { return std::min(n - 1, node * per_node + like % per_node); };
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const double b = traffic.bytes(i, j);
      if (i == j || b <= 0) continue;
      const int a = node_of(i), z = node_of(j);
      if (a == z) {
        put(false, i, j, b);
      } else if (!traffic.node_forwarding) {
        put(true, i, j, b);
      } else if (!traffic.gather_back) {  // once over the network to j's node, then NVLink to j
        const int hub = peer_in(z, i);
        put(true, i, hub, b * traffic.network_fraction);
        if (hub != j) put(false, hub, j, b);
      } else {  // NVLink to the member facing j, summed there, once over the network
        const int hub = peer_in(a, j);
        if (hub != i) put(false, i, hub, b);
        put(true, hub, j, b * traffic.network_fraction);
      }
    }

  // NVLink pieces one each; network pieces bundled by (sending node, receiver, size): they
  // share one path, so max-min gives them one rate.
  std::vector<Bundle> bundles;
  std::map<std::tuple<int, int, double>, std::size_t> across;
  for (const Piece& p : pieces) {
    if (!p.network) {
      bundles.push_back({{nvl_out[static_cast<std::size_t>(p.from)], nvl_in[static_cast<std::size_t>(p.to)]}, 1, p.bytes, p.bytes});
      continue;
    }
    const int a = node_of(p.from), z = node_of(p.to);
    const auto [it, fresh] = across.try_emplace({a, p.to, p.bytes}, bundles.size());
    if (!fresh) {
      bundles[it->second].count += 1;
      continue;
    }
    Bundle u{{node_out[static_cast<std::size_t>(a)], nic_in[static_cast<std::size_t>(p.to)]}, 1, p.bytes, p.bytes};
    const int la = leaf_of(a), lz = leaf_of(z);
    if (uplinks && la != lz) u.path.push_back(up_out[static_cast<std::size_t>(la)]), u.path.push_back(up_in[static_cast<std::size_t>(lz)]);
    bundles.push_back(std::move(u));
  }

  // Progressive filling, re-solved each time pieces land, until the last one has. The
  // paths of the bundles still moving are kept side by side with them and compacted in place.
  double now = 0;
  std::vector<std::vector<int>> paths;
  std::vector<double> weight, left, size;
  for (Bundle& u : bundles) paths.push_back(std::move(u.path)), weight.push_back(u.count), left.push_back(u.left), size.push_back(u.size);
  while (!paths.empty()) {
    const std::vector<double> rate =
        max_min_rates(paths, links.capacity, std::vector<double>(paths.size(), std::numeric_limits<double>::infinity()), weight);
    double step = std::numeric_limits<double>::infinity();
    for (std::size_t x = 0; x < paths.size(); ++x) step = std::min(step, left[x] / rate[x]);
    if (!(step > 0 && step < std::numeric_limits<double>::infinity())) throw std::logic_error("all-to-all: pieces that cannot move");
    now += step;
    std::size_t kept = 0;
    for (std::size_t x = 0; x < paths.size(); ++x) {
      left[x] -= rate[x] * step;
      if (left[x] <= size[x] * 1e-9) continue;  // pieces landing together land at once
      if (kept != x) paths[kept] = std::move(paths[x]), weight[kept] = weight[x], left[kept] = left[x], size[kept] = size[x];
      ++kept;
    }
    paths.resize(kept), weight.resize(kept), left.resize(kept), size.resize(kept);
  }
  return now;
}

GroupCollectiveCost all_to_all_cost(const GroupLayout& g, const AllToAllTraffic& traffic, const HardwareSpec& hw) {
  GroupCollectiveCost best;
  if (g.ranks == 1 || traffic.sent_bytes <= 0) {
    best.algorithm = "none";
    return best;
  }
  const bool across = g.crosses_nodes();
  if (across && !hw.cluster.present()) throw std::logic_error("a group across nodes on hardware without a cluster network");
  best.tier = across ? LinkTier::nic : LinkTier::nvlink;
  const double nic = across ? hw.cluster.nic.bytes_per_ps : 0;
  // What a member sends of its own (with node forwarding, a piece for another node counts
  // at its network size; what a member forwards for others is not counted).
  const int per_node = std::max(1, std::min(g.per_node, g.ranks));
  double busiest_send = 0;
  for (int i = 0; i < g.ranks; ++i) {
    double sent = 0;
    for (int j = 0; j < g.ranks; ++j)
      if (j != i)
        sent += traffic.bytes(i, j) * (traffic.node_forwarding && i / per_node != j / per_node ? traffic.network_fraction : 1.0);
    busiest_send = std::max(busiest_send, sent);
  }
  // Inside a node every link is NVLink and scales with a protocol's efficiency alike, so the
  // links are solved once; across nodes NVLink and the NICs take different shares.
  const double nvlink_ps = across ? 0 : all_to_all_transfer_ps(g, traffic, hw.fabric.nvlink.bytes_per_ps, 0, hw.cluster.oversubscription);
  const auto latency_of = [&](const NcclProtocol& p) {
    if (!across) return p.base_latency + p.step_latency;  // one hop to every peer at once
    const NetLatency* net = hw.cluster.latency_for(p.name);
    if (!net) throw std::logic_error("cluster network latency missing for a protocol");
    return p.base_latency + net->ring_step;
  };
  const auto priced = [&](const NcclProtocol& p) {
    const Tick lat = latency_of(p);
    const double ps = std::ceil(across ? all_to_all_transfer_ps(g, traffic, hw.fabric.nvlink.bytes_per_ps * p.bandwidth_efficiency,
                                                                nic * nccl_network_payload_share(p, hw.nccl), hw.cluster.oversubscription)
                                       : nvlink_ps / p.bandwidth_efficiency);
    if (!(ps < static_cast<double>(kTickMax - lat))) throw std::overflow_error("all-to-all time past the tick range");
    return lat + static_cast<Tick>(ps);
  };
  if (!traffic.node_forwarding) {
    // NCCL's grouped send/recv: the protocol and channels its planning gives member 0's
    // message to each peer (one round per peer distance). Every member's kernel also moves
    // its own share (a copy in the kernel), and the op ends no sooner than the busiest
    // block of any member has moved its parts (a hot member receives or sends the most).
    const auto rounds_of = [&](int m) {
      std::vector<P2pRound> rounds;
      for (int d = 1; d < g.ranks; ++d) rounds.push_back({d, traffic.bytes(m, (m + d) % g.ranks), traffic.bytes((m - d + g.ranks) % g.ranks, m)});
      rounds.push_back({0, traffic.bytes(m, m)});
      return rounds;
    };
    const P2pPlan plan = plan_p2p(rounds_of(0), {g.ranks, per_node}, hw.nccl);
    const NcclProtocol& p = *plan.protocol;
    Tick processing = p2p_processing_time(plan, hw.nccl);
    for (int m = 1; m < g.ranks && hw.nccl.p2p.channel_bytes_per_ps > 0; ++m)  // member 0: planned above
      processing = std::max(processing, p2p_processing_time(plan_p2p(rounds_of(m), {g.ranks, per_node, m}, hw.nccl), hw.nccl));
    return {std::max(priced(p), latency_of(p) + processing), "p2p", p.name, plan.blocks, best.tier, busiest_send};
  }
  best.time = kTickMax;
  for (const NcclProtocol& p : hw.nccl.protocols) {
    const Tick t = priced(p);
    if (t < best.time) best = {t, "deepep", p.name, kDeepEpSms, best.tier, busiest_send};
  }
  return best;
}

}  // namespace tpsim

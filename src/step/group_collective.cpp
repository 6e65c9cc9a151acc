#include "tpsim/step/group_collective.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tpsim/cost/nccl_cost.hpp"
#include "tpsim/cost/p2p_plan.hpp"

namespace tpsim {

std::string_view link_tier_name(LinkTier t) { return t == LinkTier::nvlink ? "nvlink" : "nic"; }

namespace {

int channels_for(const NcclProtocol& p, double bytes, int max_channels) {
  // NCCL drops a channel while the message is under channels x threads x threshold bytes.
  return static_cast<int>(std::clamp(std::floor(bytes / (p.threads * p.channel_threshold)), 1.0, static_cast<double>(max_channels)));
}

// The payload rate of a ring's (or a tree's) members; each tier carries its own share of the
// protocol's overhead (nccl_network_payload_share). Across nodes a ring's channels leave each
// node from a different member (as the simulator runs them), so of what a member sends 1/p
// goes out through its NIC and (p-1)/p over NVLink, p members a node; a tree's chain inside a
// node passes everything over NVLink.
double payload_rate(const GroupLayout& g, double nvlink, double nic, const NcclProtocol& p, const NcclSpec& nccl, bool ring) {
  const double over_nvlink = nvlink * p.bandwidth_efficiency;
  if (!g.crosses_nodes()) return over_nvlink;
  const double over_nics = g.per_node * nic * nccl_network_payload_share(p, nccl);
  if (g.per_node < 2) return over_nics;
  return std::min(ring ? over_nvlink * g.per_node / (g.per_node - 1) : over_nvlink, over_nics);
}

Tick latency_of(const NetLatency* net, bool tree) {
  if (!net) throw std::logic_error("cluster network latency missing for a protocol");
  return tree ? net->tree_step : net->ring_step;
}

}  // namespace

GroupCollectiveCost group_collective_cost(GroupOp op, double buffer_bytes, const GroupLayout& g, const HardwareSpec& hw) {
  GroupCollectiveCost best;
  if (g.ranks == 1 || buffer_bytes <= 0) {
    best.algorithm = "none";
    return best;
  }
  const bool across = g.crosses_nodes();
  if (across && !hw.cluster.present()) throw std::logic_error("a group across nodes on hardware without a cluster network");
  best.tier = across ? LinkTier::nic : LinkTier::nvlink;
  const double nvlink = hw.fabric.nvlink.bytes_per_ps;
  // A ring leaves a leaf unit once per pass through it: of the group's members in one unit,
  // one sends across. Every group of the dimension runs at once, so a unit's uplinks carry
  // 1 / (members per unit) of its GPUs' rate, and slow the ring only below that share.
  const double members_per_leaf = static_cast<double>(g.ranks) / g.leaves;
  const double uplink_share = g.leaves > 1 ? std::min(1.0, members_per_leaf / hw.cluster.oversubscription) : 1.0;
  const double nic = across ? hw.cluster.nic.bytes_per_ps * uplink_share : 0;
  if (op == GroupOp::send_recv) {
    // One GPU to its neighbour (and from the one behind): its own NVLink port or its own NIC,
    // in the protocol and on the channels NCCL's send/recv planning gives the message.
    const P2pPlan plan = plan_p2p({{1, buffer_bytes}}, {g.ranks, g.per_node}, hw.nccl);
    const NcclProtocol& p = *plan.protocol;
    const double payload = across ? hw.cluster.nic.bytes_per_ps * nccl_network_payload_share(p, hw.nccl) : nvlink * p.bandwidth_efficiency;
    const Tick lat = p.base_latency + (across ? hw.cluster.nic.latency : hw.fabric.nvlink.latency);
    const Tick time = lat + std::max(duration_for(buffer_bytes, payload), p2p_processing_time(plan, hw.nccl));
    return {time, "p2p", p.name, plan.blocks, best.tier, buffer_bytes};
  }
  best.time = kTickMax;
  // NCCL picks the algorithm and protocol by its own estimate (links only; no start-up in
  // it: a ring's depends on its protocol, the other algorithms take nccl.ring_startup); the
  // one it picks then pays its start-up, and a ring takes no less than its blocks need to
  // process the buffer (ring_processing_time).
  Tick best_estimate = kTickMax, ring_floor = 0;
  const auto consider = [&](Tick estimate, Tick startup, GroupCollectiveCost candidate) {
    if (estimate >= best_estimate) return false;
    best_estimate = estimate;
    candidate.time = startup + estimate;
    best = std::move(candidate);
    return true;
  };
  const int n = g.ranks;
  const bool all_reduce = op == GroupOp::all_reduce;
  const int passes = all_reduce ? 2 : 1;  // reduce-scatter then all-gather
  const double wire = passes * buffer_bytes * (n - 1) / n;
  const CollectiveKind kind = all_reduce ? CollectiveKind::all_reduce
                              : op == GroupOp::all_gather ? CollectiveKind::all_gather
                                                          : CollectiveKind::reduce_scatter;
  for (const NcclProtocol& p : hw.nccl.protocols) {
    const NetLatency* net = across ? hw.cluster.latency_for(p.name) : nullptr;
    const double bus = payload_rate(g, nvlink, nic, p, hw.nccl, true);
    const int steps = passes * (n - 1), inter = across ? passes * (g.nodes - 1) : 0;
    const Tick ring_lat = p.base_latency + static_cast<Tick>(steps - inter) * p.step_latency +
                          (across ? static_cast<Tick>(inter) * latency_of(net, false) : 0);
    const Tick startup = nccl_ring_startup(p, hw.nccl);
    const int ch = channels_for(p, buffer_bytes, hw.nccl.max_channels);
    if (consider(ring_lat + duration_for(wire, bus), startup, {0, "ring", p.name, ch, best.tier, wire}))
      ring_floor = startup + ring_processing_time(kind, buffer_bytes, n, ch, hw.nccl);
  }
  if (all_reduce && across) {
    for (const NcclProtocol& p : hw.nccl.protocols) {
      // Chains inside nodes, a tree across them, up and down; the bus bandwidth NCCL
      // gives a tree is a fraction of the ring's, and each byte goes up and comes down.
      const NetLatency* net = hw.cluster.latency_for(p.name);
      const Tick depth = static_cast<Tick>(std::ceil(std::log2(static_cast<double>(g.nodes))));
      const Tick tree_lat = p.base_latency + 2 * (static_cast<Tick>(g.per_node - 1) * p.step_latency + depth * latency_of(net, true));
      const Tick tree = tree_lat + duration_for(2 * buffer_bytes, payload_rate(g, nvlink, nic, p, hw.nccl, false) *
                                                                       hw.cluster.tree_bandwidth_ratio);
      const int ch = channels_for(p, buffer_bytes, hw.nccl.max_channels);
      consider(tree, nccl_ring_startup(p, hw.nccl), {0, "tree", p.name, ch, best.tier, 2 * buffer_bytes});
    }
  }
  // NVLS tree: an all-reduce across nodes with two or more members in each, on nodes with NVLS.
  const NodeSpread spread{g.per_node, g.nodes, g.per_node};
  if (all_reduce && nvls_tree_applies(CollectiveKind::all_reduce, spread, hw))
    consider(nvls_tree_estimate(buffer_bytes, g.per_node, g.nodes, hw, nic), hw.nccl.ring_startup,
             {0, "nvls_tree", "Simple", hw.nccl.nvls.channels, best.tier, nvls_tree_nic_bytes(buffer_bytes, g.per_node, g.nodes)});
  // CollNet (the switches reduce; the scenario's nccl_collnet): each member's 1/p slice crosses
  // its NIC once each way, where a ring's bytes cross 2(n-1)/n times.
  if (all_reduce && collnet_applies(CollectiveKind::all_reduce, spread, hw)) {
    const int ch = channels_for(nccl_simple_protocol(hw.nccl), buffer_bytes, hw.nccl.max_channels);
    consider(collnet_direct_estimate(buffer_bytes, g.per_node, hw, nic), hw.nccl.ring_startup,
             {0, "collnet_direct", "Simple", ch, best.tier, buffer_bytes / g.per_node});
  }
  if (all_reduce && nvls_collnet_applies(CollectiveKind::all_reduce, spread, hw))
    consider(nvls_collnet_estimate(buffer_bytes, g.per_node, hw, nic), hw.nccl.ring_startup,
             {0, "nvls_collnet", "Simple", hw.nccl.nvls.channels, best.tier, buffer_bytes / g.per_node});
  // NVLS: an all-reduce inside one NVSwitch node, where the hardware has it.
  if (all_reduce && nvls_applies(CollectiveKind::all_reduce, g.ranks, !across, hw)) {
    const CollectivePlan nvls = plan_nvls(buffer_bytes, g.ranks, hw);
    consider(nvls_estimate(buffer_bytes, g.ranks, hw, nvlink), hw.nccl.ring_startup,
             {0, "nvls", nvls.protocol->name, nvls.channels, best.tier, nvls.bytes_per_rank});
  }
  if (best.algorithm == "ring") best.time = std::max(best.time, ring_floor);
  return best;
}

}  // namespace tpsim

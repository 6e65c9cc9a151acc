#include "tpsim/cost/nccl_cost.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tpsim {

namespace {
// What each rank sends to its ring successor: one buffer share per step.
double ring_bytes_per_rank(CollectiveKind kind, double buffer_bytes, int ranks) {
  return buffer_bytes * ring_steps(kind, ranks) / ranks;
}

// Each port carries (n+1)/n of the buffer each way (see CollectivePlan).
double nvls_bytes_per_rank(double buffer_bytes, int ranks) { return buffer_bytes * (ranks + 1) / ranks; }

// NCCL's NVLS bus bandwidth: the hardware's efficiency, less one channel's share
// (src/graph/tuning.cc: bwIntra * nvlsEfficiency * (nChannels - 1) / nChannels).
double nvls_efficiency(const NvlsSpec& n) { return n.efficiency * (n.channels - 1) / n.channels; }

// NVLS, the NVLS tree and CollNet run NCCL's Simple protocol only.
const NcclProtocol& simple_protocol(const HardwareSpec& hw) { return nccl_simple_protocol(hw.nccl); }
}  // namespace

const NcclProtocol& nccl_simple_protocol(const NcclSpec& nccl) {
  for (const NcclProtocol& p : nccl.protocols)
    if (p.name == "Simple") return p;
  throw std::logic_error("no NCCL Simple protocol (the hardware loader requires it)");
}

Tick nccl_ring_startup(const NcclProtocol& proto, const NcclSpec& nccl) { return proto.startup.value_or(nccl.ring_startup); }

double nccl_network_payload_share(const NcclProtocol& proto, const NcclSpec& nccl) {
  return std::min(1.0, proto.bandwidth_efficiency / nccl_simple_protocol(nccl).bandwidth_efficiency);
}

Tick ring_estimate(const NcclProtocol& proto, CollectiveKind kind, double buffer_bytes, int ranks, double link_bytes_per_ps) {
  return proto.base_latency + ring_steps(kind, ranks) * proto.step_latency +
         duration_for(ring_bytes_per_rank(kind, buffer_bytes, ranks), link_bytes_per_ps * proto.bandwidth_efficiency);
}

Tick ring_processing_time(CollectiveKind kind, double buffer_bytes, int ranks, int channels, const NcclSpec& nccl) {
  if (!nccl.channel_rates_present() || ranks < 2 || channels < 1) return 0;
  const double copied = kind == CollectiveKind::reduce_scatter ? 0.0 : buffer_bytes;
  const double reduced = kind == CollectiveKind::all_gather ? 0.0 : buffer_bytes;
  return duration_for(copied, channels * nccl.channel_copy_bytes_per_ps) +
         duration_for(reduced, channels * nccl.channel_reduce_bytes_per_ps);
}

CollectivePlan plan_ring(CollectiveKind kind, double buffer_bytes, int ranks, const HardwareSpec& hw, double link_bytes_per_ps) {
  CollectivePlan plan;
  Tick best = kTickMax;
  for (const NcclProtocol& proto : hw.nccl.protocols) {
    const Tick t = ring_estimate(proto, kind, buffer_bytes, ranks, link_bytes_per_ps);
    if (t < best) best = t, plan.protocol = &proto;
  }
  const NcclProtocol& p = *plan.protocol;
  // NCCL drops a channel while the message is under channels x threads x threshold bytes.
  const double per_channel = p.threads * p.channel_threshold;
  plan.channels = static_cast<int>(std::clamp(std::floor(buffer_bytes / per_channel), 1.0,
                                              static_cast<double>(hw.nccl.max_channels)));
  const Tick startup = nccl_ring_startup(p, hw.nccl);
  plan.latency = startup + p.base_latency + ring_steps(kind, ranks) * p.step_latency;
  plan.bytes_per_rank = ring_bytes_per_rank(kind, buffer_bytes, ranks);
  plan.threads = p.threads;
  plan.efficiency = p.bandwidth_efficiency;
  plan.nic_efficiency = nccl_network_payload_share(p, hw.nccl);
  plan.processing = startup + ring_processing_time(kind, buffer_bytes, ranks, plan.channels, hw.nccl);
  return plan;
}

bool nvls_applies(CollectiveKind kind, int ranks, bool one_node, const HardwareSpec& hw) {
  return kind == CollectiveKind::all_reduce && one_node && hw.nccl.nvls.present() && ranks >= hw.nccl.nvls.min_ranks;
}

Tick nvls_estimate(double buffer_bytes, int ranks, const HardwareSpec& hw, double link_bytes_per_ps) {
  const NvlsSpec& n = hw.nccl.nvls;
  return n.latency + duration_for(nvls_bytes_per_rank(buffer_bytes, ranks), link_bytes_per_ps * nvls_efficiency(n));
}

CollectivePlan plan_nvls(double buffer_bytes, int ranks, const HardwareSpec& hw) {
  const NvlsSpec& n = hw.nccl.nvls;
  CollectivePlan plan;
  plan.algorithm = NcclAlgorithm::nvls;
  plan.protocol = &simple_protocol(hw);
  // NCCL runs NVLS on all its NVLS channels whatever the size (src/enqueue.cc).
  plan.channels = n.channels;
  plan.threads = n.threads;
  plan.latency = hw.nccl.ring_startup + n.latency;
  plan.bytes_per_rank = nvls_bytes_per_rank(buffer_bytes, ranks);
  plan.efficiency = nvls_efficiency(n);
  return plan;
}

bool nvls_tree_applies(CollectiveKind kind, NodeSpread spread, const HardwareSpec& hw) {
  return kind == CollectiveKind::all_reduce && spread.per_node >= 2 && spread.nodes >= 2 && hw.nccl.nvls.present() &&
         hw.cluster.latency_for("Simple");
}

double nvls_tree_nic_bytes(double buffer_bytes, int per_node, int nodes) {
  return buffer_bytes / per_node * (nodes > 2 ? 2 : 1);
}

namespace {
// NCCL's NVLS latency, then a network level up and one down per tree level.
Tick nvls_tree_latency(int nodes, const HardwareSpec& hw) {
  const NetLatency* net = hw.cluster.latency_for("Simple");
  if (!net || !hw.nccl.nvls.present()) throw std::logic_error("NVLS tree without NVLS or the cluster's network latency");
  const auto levels = static_cast<Tick>(std::ceil(std::log2(static_cast<double>(nodes))));
  return hw.nccl.nvls.latency + 2 * levels * net->nvls_tree_step;
}
}  // namespace

Tick nvls_tree_estimate(double buffer_bytes, int per_node, int nodes, const HardwareSpec& hw, double nic_bytes_per_ps) {
  const Tick in_node =
      duration_for(nvls_bytes_per_rank(buffer_bytes, per_node), hw.fabric.nvlink.bytes_per_ps * nvls_efficiency(hw.nccl.nvls));
  // Simple's chunks cross the network whole (nccl_network_payload_share).
  const Tick across = duration_for(nvls_tree_nic_bytes(buffer_bytes, per_node, nodes), nic_bytes_per_ps);
  return nvls_tree_latency(nodes, hw) + std::max(in_node, across);
}

CollectivePlan plan_nvls_tree(double buffer_bytes, NodeSpread spread, const HardwareSpec& hw) {
  CollectivePlan plan = plan_nvls(buffer_bytes, spread.per_node, hw);
  plan.algorithm = NcclAlgorithm::nvls_tree;
  plan.latency = hw.nccl.ring_startup + nvls_tree_latency(spread.nodes, hw);
  plan.nic_bytes_per_rank = nvls_tree_nic_bytes(buffer_bytes, spread.per_node, spread.nodes);
  plan.nic_efficiency = nccl_network_payload_share(simple_protocol(hw), hw.nccl);
  return plan;
}

bool collnet_applies(CollectiveKind kind, NodeSpread spread, const HardwareSpec& hw) {
  // NCCL keeps CollNetDirect to nodes on an NVSwitch (tuning.cc: nvsCount == 0 disables it).
  const bool nvswitch = hw.fabric.topology == "switch" || hw.fabric.topology == "multi_node";
  return kind == CollectiveKind::all_reduce && spread.nodes >= 2 && nvswitch && hw.cluster.sharp.present();
}

Tick collnet_direct_estimate(double buffer_bytes, int per_node, const HardwareSpec& hw, double nic_bytes_per_ps) {
  const NcclProtocol& simple = simple_protocol(hw);
  const double p = static_cast<double>(per_node);
  const Tick in_node = duration_for(2 * buffer_bytes * (p - 1) / p, hw.fabric.nvlink.bytes_per_ps * simple.bandwidth_efficiency);
  const Tick across = duration_for(buffer_bytes / p, nic_bytes_per_ps);  // Simple's chunks cross whole
  return 2 * simple.step_latency + hw.cluster.sharp.latency + std::max(in_node, across);
}

bool nvls_collnet_applies(CollectiveKind kind, NodeSpread spread, const HardwareSpec& hw) {
  return kind == CollectiveKind::all_reduce && spread.nodes >= 2 && hw.nccl.nvls.present() && spread.per_node >= hw.nccl.nvls.min_ranks &&
         hw.cluster.sharp.present() && hw.cluster.sharp.nvls_latency > 0;
}

Tick nvls_collnet_estimate(double buffer_bytes, int per_node, const HardwareSpec& hw, double nic_bytes_per_ps) {
  const Tick in_node =
      duration_for(nvls_bytes_per_rank(buffer_bytes, per_node), hw.fabric.nvlink.bytes_per_ps * nvls_efficiency(hw.nccl.nvls));
  const Tick across = duration_for(buffer_bytes / per_node, nic_bytes_per_ps);
  return hw.nccl.nvls.latency + hw.cluster.sharp.nvls_latency + std::max(in_node, across);
}

CollectivePlan plan_collective(CollectiveKind kind, double buffer_bytes, int ranks, bool one_node, const HardwareSpec& hw,
                               double link_bytes_per_ps, NodeSpread spread, double nic_bytes_per_ps) {
  CollectivePlan ring = plan_ring(kind, buffer_bytes, ranks, hw, link_bytes_per_ps);
  const Tick ring_t = ring_estimate(*ring.protocol, kind, buffer_bytes, ranks, link_bytes_per_ps);
  if (nvls_applies(kind, ranks, one_node, hw))
    return nvls_estimate(buffer_bytes, ranks, hw, link_bytes_per_ps) < ring_t ? plan_nvls(buffer_bytes, ranks, hw) : ring;
  if (!one_node && nic_bytes_per_ps > 0 && nvls_tree_applies(kind, spread, hw) && nvls_tree_estimate(buffer_bytes, spread.per_node, spread.nodes, hw, nic_bytes_per_ps) < ring_t)
    return plan_nvls_tree(buffer_bytes, spread, hw);
  return ring;
}

}  // namespace tpsim

#pragma once
// NCCL collectives of one process group: which algorithm (ring, or NVLS for an
// all-reduce inside an NVSwitch node), protocol and how many channels NCCL picks for
// a message, the fixed latency, and the payload rate cap. The bytes themselves move
// over the simulated fabric.
#include <cstdint>
#include <string_view>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

enum class CollectiveKind { all_gather, reduce_scatter, all_reduce };

inline std::string_view collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_reduce: return "all_reduce";
  }
  return "?";
}

// Ring steps a rank takes: n-1 for all-gather and reduce-scatter; NCCL's ring all-reduce
// is a reduce-scatter then an all-gather, 2(n-1) (src/graph/tuning.cc: nsteps).
inline int ring_steps(CollectiveKind k, int ranks) { return (k == CollectiveKind::all_reduce ? 2 : 1) * (ranks - 1); }

enum class NcclAlgorithm { ring, nvls, nvls_tree };
inline std::string_view nccl_algorithm_name(NcclAlgorithm a) {
  return a == NcclAlgorithm::ring ? "ring" : a == NcclAlgorithm::nvls ? "nvls" : "nvls_tree";
}

// How a group's ranks sit on nodes: `per_node` in each of `nodes` (0 when uneven).
struct NodeSpread {
  int per_node = 0;
  int nodes = 1;
  int most = 0;  // members in the fullest node (NCCL's maxLocalRanks), even or not
};

struct CollectivePlan {
  NcclAlgorithm algorithm = NcclAlgorithm::ring;
  const NcclProtocol* protocol = nullptr;  // NVLS runs NCCL's Simple protocol
  int channels = 0;
  int threads = 0;               // per channel block
  Tick latency = 0;              // ring: startup + base + steps x per-hop; NVLS: startup + NCCL's NVLS latency
  // Ring: what each rank sends to its successor, steps/n of the buffer. NVLS: what each
  // rank's port carries each way, (n+1)/n of the buffer (reads for the switch's
  // reduction of every slice, its own reduced slice back, its multicast store out,
  // every slice's multicast in).
  double bytes_per_rank = 0;
  double efficiency = 0;         // fraction of the link's payload rate the transfers reach
  double nic_bytes_per_rank = 0;  // NVLS tree: what each member sends to another node
  double nic_efficiency = 0;      // the protocol's payload share on a NIC (nccl_network_payload_share)
  // Ring: the least time from every rank resident to the kernels' end: the startup, then
  // the channels processing the buffer (ring_processing_time), which they do through the
  // pipeline fill that the per-step latencies stand for.
  Tick processing = 0;
};

// A ring's channels process the whole buffer on every rank whatever the group size: n
// stages of buffer/n (the first send, n-2 forwards, the last receive) where the links
// carry only (n-1)/n of it. Each channel's block moves its share through a copy loop
// (all-gather stages) or a reduce loop (reduce-scatter stages) at a bounded rate, so a
// small group's ring is bound by its blocks rather than by its links. An all-reduce ring
// reduces the buffer and copies all of it: the step that completes a chunk's sum also stores
// and forwards it (recvReduceCopySend in NCCL's src/device/all_reduce.h runRing), so the
// all-gather half handles n chunks, as an all-gather's first copySend does. 0 where the
// hardware gives no rates.
Tick ring_processing_time(CollectiveKind kind, double buffer_bytes, int ranks, int channels, const NcclSpec& nccl);

// `buffer_bytes`: the whole gathered buffer (all-gather output, reduce-scatter input,
// the buffer every rank all-reduces); `link_bytes_per_ps`: the narrowest hop of the
// ring. Each hop's transfer is capped at the protocol's payload efficiency times that
// hop's own bandwidth. All-gather and reduce-scatter rings move the same bytes with the
// same steps; an all-reduce moves twice the bytes in twice the steps.
CollectivePlan plan_ring(CollectiveKind kind, double buffer_bytes, int ranks, const HardwareSpec& hw, double link_bytes_per_ps);

// NVLS applies to an all-reduce whose ranks share one NVSwitch (`one_node`) on
// hardware that has it, in a communicator of at least nvls.min_ranks GPUs; NCCL takes it
// where its estimate beats the best ring.
bool nvls_applies(CollectiveKind kind, int ranks, bool one_node, const HardwareSpec& hw);
CollectivePlan plan_nvls(double buffer_bytes, int ranks, const HardwareSpec& hw);
Tick nvls_estimate(double buffer_bytes, int ranks, const HardwareSpec& hw, double link_bytes_per_ps);
// NCCL's NVLS tree (all-reduce only, across nodes, Simple protocol, on hardware with
// NVLS; src/graph/tuning.cc and src/device/all_reduce.h, NCCL 2.19-2.30): inside each
// node the NVSwitch reduce-scatters the buffer over the node's `per_node` members
// (each port carries (p+1)/p of it, as NVLS), each member all-reduces its 1/p slice
// across the `nodes` nodes through its own NIC in a tree (up then down: twice the slice
// per direction through an inner node, once with two nodes, where NCCL's model doubles
// the bandwidth), and the switch multicasts the result back. The two tiers pipeline:
// the slower sets the pace. Latency: NCCL's NVLS latency plus a network level up and
// one down per tree level.
bool nvls_tree_applies(CollectiveKind kind, NodeSpread spread, const HardwareSpec& hw);
Tick nvls_tree_estimate(double buffer_bytes, int per_node, int nodes, const HardwareSpec& hw, double nic_bytes_per_ps);
double nvls_tree_nic_bytes(double buffer_bytes, int per_node, int nodes);

// NVLS tree as run: `bytes_per_rank` and `efficiency` are the NVLink side's (as NVLS),
// `nic_bytes_per_rank` and `nic_efficiency` what each member sends across nodes.
CollectivePlan plan_nvls_tree(double buffer_bytes, NodeSpread spread, const HardwareSpec& hw);

// NCCL's CollNet all-reduce across nodes on switches that reduce in the network (SHARP;
// src/graph/tuning.cc and src/device/all_reduce.h, NCCL 2.18-2.21). Each of a node's p members
// takes a 1/p slice: reduced inside the node, sent up the switch tree once through the member's
// own NIC, the reduced slice received back and spread inside the node again; the two tiers
// pipeline. CollNetDirect (NVSwitch nodes) moves the slices over NVLink directly, 2(p-1)/p of
// the buffer each way in Simple's chunks; NVLS with CollNet lets the NVSwitch reduce and
// multicast, as NVLS inside one node. `nic_bytes_per_ps`: one member's NIC rate.
bool collnet_applies(CollectiveKind kind, NodeSpread spread, const HardwareSpec& hw);
Tick collnet_direct_estimate(double buffer_bytes, int per_node, const HardwareSpec& hw, double nic_bytes_per_ps);
bool nvls_collnet_applies(CollectiveKind kind, NodeSpread spread, const HardwareSpec& hw);
Tick nvls_collnet_estimate(double buffer_bytes, int per_node, const HardwareSpec& hw, double nic_bytes_per_ps);

// The algorithm NCCL picks, by its estimate, for a collective of `ranks` ranks laid out
// as `spread` (NVLS inside one node; the NVLS tree across nodes with two or more per node;
// else a ring). `nic_bytes_per_ps`: one GPU's route to its peer in another node.
CollectivePlan plan_collective(CollectiveKind kind, double buffer_bytes, int ranks, bool one_node, const HardwareSpec& hw,
                               double link_bytes_per_ps, NodeSpread spread = {}, double nic_bytes_per_ps = 0);

// NCCL's Simple protocol (the hardware loader requires it).
const NcclProtocol& nccl_simple_protocol(const NcclSpec& nccl);

// What a ring on `proto` takes before its first hop: the protocol's own start where the
// hardware file gives one, else the one every ring has (nccl.ring_startup).
Tick nccl_ring_startup(const NcclProtocol& proto, const NcclSpec& nccl);

// The payload's share of what a protocol puts on a NIC between nodes. `bandwidth_efficiency`
// is its share on NVLink, where SMs store 128-byte payloads with their own overhead; over
// the network NCCL's proxy posts RDMA writes of the protocol's buffers, so what remains is
// the protocol's format relative to Simple's plain chunks: LL's flag in every 8 bytes (0.5),
// LL128's in every 128 (120/128), as NCCL's tuning model scales them against Simple
// (src/graph/tuning.cc). The NIC's own RDMA efficiency is in its rate.
double nccl_network_payload_share(const NcclProtocol& proto, const NcclSpec& nccl);

// NCCL's own estimate (latency + bytes / bandwidth) for a protocol, used to choose it.
Tick ring_estimate(const NcclProtocol& proto, CollectiveKind kind, double buffer_bytes, int ranks, double link_bytes_per_ps);

}  // namespace tpsim

#pragma once
// One all-to-all of a mesh dimension's group as the flows it is. NCCL runs it as grouped
// send/recv: every member sends its piece to every other at once (src/device/all_to_all
// and ncclGroupStart/End p2p in NCCL 2.x). A piece for a member of the same node crosses the
// sender's NVLink egress port and the receiver's ingress port. A piece for another node
// leaves through the sending node's NICs and enters through the receiver's NIC: with PXN
// (NCCL 2.12+, on by default) a piece is first forwarded over NVLink to the GPU on the
// receiver's rail, so a node's NICs serve its senders together; since every member of a
// node addresses the same shares, that pool gives the same rates as each sender using its
// own NIC. Pieces between leaf units also cross both units' uplinks; every GPU of a unit
// runs its own group's all-to-all at the same time, so this group gets its members' share of
// them: members x NIC / oversubscription. Rates are max-min fair (progressive filling) and
// re-solved whenever a piece lands; the all-to-all ends with its last piece. The NVLink hop
// that PXN adds is not charged (NVLink is an order of magnitude faster than a NIC).
#include <vector>

#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/step/group_layout.hpp"

namespace tpsim {

// Token-choice traffic: every member addresses share[j] of its `sent_bytes` to member j
// (its own share stays home), so member j receives n x sent_bytes x share[j]. With
// `gather_back` the transpose (the combine: member j returns sent_bytes x share[j] to each).
//
// `node_forwarding`: DeepEP's form (DeepSeek-V3 technical report, arXiv 2412.19437,
// section 3.2.2). A token crosses the network once per node it is routed to, to that node's
// member at the sender's in-node index, which forwards each of the token's slots over NVLink
// to its expert's GPU; the combine runs backwards: the experts' outputs go over NVLink to
// the member at the token owner's in-node index, which sums them ("NVLink-to-IB forwarding
// and accumulation") and sends one per token. `network_fraction` is then the network bytes
// per slot byte between two nodes: the distinct nodes a token is routed to over top_k.
struct AllToAllTraffic {
  double sent_bytes = 0;
  std::vector<double> share;  // per member, summing to 1
  bool gather_back = false;
  bool node_forwarding = false;
  double network_fraction = 1;
  double bytes(int from, int to) const {
    return sent_bytes * share[static_cast<std::size_t>(gather_back ? from : to)];
  }
};

// Picoseconds the pieces take on the links alone (no latency, no protocol
// efficiency). Members fill nodes in order, `per_node` to a node (group_layout's layout:
// every group of a dimension is placed alike), and the group's nodes fill its leaf units
// evenly.
double all_to_all_transfer_ps(const GroupLayout& g, const AllToAllTraffic& traffic, double nvlink_bytes_per_ps,
                              double nic_bytes_per_ps, double oversubscription);

// SMs DeepEP's all-to-all kernels hold: DeepSeek-V3's report (section 3.2.2) partitions 20
// SMs into 10 communication channels, enough for IB and NVLink; DeepEP's Buffer takes 20 by
// default (num_sms).
constexpr int kDeepEpSms = 20;

// As group_collective_cost prices its collectives: per NCCL protocol, its latency (and the
// network's across nodes) plus the transfer at its bandwidth efficiency; the fastest.
// `wire_bytes` is what the busiest sender puts on the links. With node forwarding the
// algorithm is "deepep" and holds kDeepEpSms SMs instead of NCCL's p2p channels.
GroupCollectiveCost all_to_all_cost(const GroupLayout& g, const AllToAllTraffic& traffic, const HardwareSpec& hw);

}  // namespace tpsim

#pragma once
// The time of one NCCL collective of a mesh dimension's group, in the spirit of
// NCCL's own tuning model (src/graph/tuning.cc): for each algorithm (ring; tree and,
// on NVLS nodes, NVLS tree for an all-reduce across nodes; NVLS for one inside an
// NVSwitch node) and protocol, latency + bytes / bus bandwidth, and
// NCCL's choice is the fastest. Inside a node the bus bandwidth is the NVLink port;
// across nodes a ring's node boundary is crossed by the NICs of the group's members
// in that node (one per GPU); between leaf units, the oversubscribed uplinks carry the
// hops that leave a unit (one per pass of the ring through it).
// Used for the collectives a training step adds around the TP group (FSDP, DP, PP),
// which are charged as whole operations, not block by block.
#include <string>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/step/group_layout.hpp"

namespace tpsim {

enum class GroupOp { all_gather, reduce_scatter, all_reduce, send_recv };  // all-to-alls: step/all_to_all
enum class LinkTier { nvlink, nic };
std::string_view link_tier_name(LinkTier t);

// A quantity per link tier: bytes one GPU sends on each, or the fraction of each it draws.
struct PerTier {
  double nvlink = 0, nic = 0;
  double on(LinkTier t) const { return t == LinkTier::nvlink ? nvlink : nic; }
  PerTier& operator+=(const PerTier& o) {
    nvlink += o.nvlink, nic += o.nic;
    return *this;
  }
  PerTier operator+(const PerTier& o) const { return PerTier(*this) += o; }
};

struct GroupCollectiveCost {
  Tick time = 0;
  std::string algorithm;  // "ring" | "tree" | "nvls" | "nvls_tree" | "collnet_direct" | "nvls_collnet" | "p2p" | "deepep" | "none"
  std::string protocol;
  int channels = 0;       // SMs the kernel holds (one block per channel)
  LinkTier tier = LinkTier::nvlink;
  double wire_bytes = 0;  // bytes each rank sends
};

// One collective of a training step as charged: per call.
struct StepCollective {
  std::string dim, op;
  double bytes = 0;  // buffer as NCCL sees it
  GroupCollectiveCost cost;
};

// Where a layer pass's own communication falls inside it (for the step's trace): a TP
// region's collectives or copies, a CP exchange, an EP all-to-all; times from the pass's
// start, as simulated alone.
struct LayerPhase {
  std::string name, dim;
  Tick start = 0, duration = 0;
};

// `buffer_bytes`: the all-gather's output, the reduce-scatter's input, the
// all-reduce's buffer, or the message of a send/recv between neighbours.
GroupCollectiveCost group_collective_cost(GroupOp op, double buffer_bytes, const GroupLayout& g, const HardwareSpec& hw);

}  // namespace tpsim

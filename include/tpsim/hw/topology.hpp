#pragma once
// How a node's (or nodes') GPUs are wired: a set of directed bandwidth resources
// (NVLink ports, bridges, PCIe lanes, NICs) and, for each GPU pair, the route a
// transfer takes through them and the latency before its first byte lands.
//   switch:     every GPU has one NVLink egress and ingress port into NVSwitch.
//   pairs:      GPUs 2i and 2i+1 share an NVLink bridge; other pairs go over PCIe.
//   ring:       NVLink only to the two ring neighbours; farther GPUs are reached
//               hop by hop through the ones in between.
//   multi_node: NVSwitch inside each node of `gpus_per_node`, one NIC per GPU between nodes.
// Every transfer also reads its source GPU's HBM and writes its destination's:
// with a finite HBM bandwidth each GPU's HBM is a resource on every route that
// starts or ends there (link traffic goes first; SMs share what it leaves).
#include <limits>
#include <string>
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

struct Route {
  std::vector<int> resources;
  Tick latency = 0;
};

class Topology {
 public:
  Topology(const FabricSpec& spec, int gpus, double hbm_bytes_per_ps = std::numeric_limits<double>::infinity());

  int gpus() const { return gpus_; }
  int resources() const { return static_cast<int>(capacity_.size()); }
  double capacity(int resource) const { return capacity_[static_cast<std::size_t>(resource)]; }
  const std::string& name(int resource) const { return names_[static_cast<std::size_t>(resource)]; }
  // A GPU's HBM rather than a link: it sees a transfer's payload only, never the
  // protocol's overhead on the wire.
  bool is_memory(int resource) const { return first_memory_ >= 0 && resource >= first_memory_; }
  // A NIC between nodes rather than NVLink or PCIe: a protocol's overhead on it is its
  // own (RDMA carries Simple's chunks whole; see nccl_network_payload_share).
  bool is_network(int resource) const { return network_[static_cast<std::size_t>(resource)] != 0; }
  const Route& route(int src, int dst) const { return routes_[static_cast<std::size_t>(src * gpus_ + dst)]; }
  // The narrowest resource on the route: what one transfer alone can reach.
  double route_capacity(int src, int dst) const;
  // Nodes: GPUs [n * gpus_per_node, (n+1) * gpus_per_node) share NVSwitch. One node
  // unless the topology is multi_node.
  int gpus_per_node() const { return per_node_; }
  int node_of(int gpu) const { return gpu / per_node_; }
  // Sum of the distinct first-hop resources leaving `gpu`: all it can send at once.
  double egress_capacity(int gpu) const;

 private:
  int add(const std::string& name, double capacity, bool network = false);
  void build_switched_nodes(const FabricSpec& spec);  // "switch" and "multi_node"
  void build_pairs(const FabricSpec& spec);
  void build_ring(const FabricSpec& spec);
  void add_hbm(double bytes_per_ps);

  int gpus_;
  int per_node_;
  int first_memory_ = -1;  // HBM resources come after every link
  std::vector<double> capacity_;
  std::vector<std::string> names_;
  std::vector<char> network_;
  std::vector<Route> routes_;
};

}  // namespace tpsim

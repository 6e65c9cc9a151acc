#pragma once
// Transfers between GPUs over a Topology. Concurrent transfers share every
// resource on their routes max-min fairly (progressive filling), each also capped
// by its own rate (a copy engine). A protocol's overhead is on the wire: a transfer
// whose payload is a fraction p of what it puts on a link takes 1/p of a link's
// capacity per payload byte (and its HBM only the payload), so several transfers out
// of one port carry no more payload together than one alone. NVLink (or PCIe) and a
// NIC between nodes each have their own share: what SMs store over NVLink is not what
// RDMA puts on the network. Whenever a transfer starts or ends,
// rates are recomputed and the transfers whose rate changed are re-timed. Bytes
// are conserved: what a GPU's egress integrates to equals what it sent.
#include <cstdint>
#include <functional>
#include <vector>

#include "tpsim/core/simulator.hpp"
#include "tpsim/hw/topology.hpp"

namespace tpsim {

// The payload's share (0, 1] of the bytes a transfer puts on each link: on NVLink and
// PCIe (`link`), on a NIC between nodes (`network`).
struct PayloadShare {
  double link = 1;
  double network = 1;
};

class Fabric {
 public:
  using FlowId = int;

  Fabric(Simulator& sim, Topology topology);

  // After the route's latency, moves `bytes` from src to dst; then calls on_done.
  // `share`: the payload's share of the bytes it puts on each link.
  FlowId start(int src, int dst, double bytes, double rate_cap_bytes_per_ps, std::function<void()> on_done,
               PayloadShare share = {});

  const Topology& topology() const { return topo_; }
  int gpus() const { return topo_.gpus(); }
  double rate(FlowId id) const { return flows_[static_cast<std::size_t>(id)].rate; }
  double bytes_started() const { return bytes_started_; }
  // How many transfer rates have been solved in all (re-timing work done).
  std::uint64_t rates_solved() const { return rates_solved_; }
  double bytes_delivered() const { return bytes_delivered_; }
  // Integral of egress rate over time, per GPU: equals the bytes it sent.
  // (Settled at every rate change and at the end of each transfer.)
  double egress_bytes(int gpu) const { return egress_bytes_[static_cast<std::size_t>(gpu)]; }
  // Of those, the bytes of finished transfers to GPUs in other nodes (over the NICs).
  double egress_bytes_across_nodes(int gpu) const { return egress_across_[static_cast<std::size_t>(gpu)]; }
  // Called with (now, gpu, egress bytes/ps, ingress bytes/ps) whenever either changes.
  void set_rate_observer(std::function<void(Tick, int, double, double)> obs) { observer_ = std::move(obs); }

 private:
  struct Flow {
    int src = 0, dst = 0;
    double total = 0, remaining = 0, rate = 0, cap = 0;
    double wire = 1;          // NVLink or PCIe bytes per payload byte
    double network_wire = 1;  // NIC bytes per payload byte
    Tick since = 0;  // remaining is as of this time
    std::uint64_t seen = 0;  // last component search that reached it
    EventHandle done_event;
    std::function<void()> on_done;
  };

  const std::vector<int>& path(FlowId id) const;
  // What one payload byte of the flow takes of resource r on its path.
  double use(const Flow& f, int r) const {
    return topo_.is_memory(r) ? 1.0 : topo_.is_network(r) ? f.network_wire : f.wire;
  }
  void settle(Flow& f);
  void activate(FlowId id);
  std::vector<FlowId> component(const std::vector<int>& seeds);
  void assign_max_min_rates(const std::vector<FlowId>& flows, std::vector<double>& rate) const;
  void retime(const std::vector<int>& changed_resources);
  void check_capacity(const std::vector<FlowId>& flows, const std::vector<double>& rate) const;
  void request_retime(const std::vector<int>& resources);
  void finish(FlowId id);

  Simulator& sim_;
  Topology topo_;
  std::vector<Flow> flows_;
  std::vector<std::vector<FlowId>> users_;  // per resource: active flows crossing it
  double bytes_started_ = 0, bytes_delivered_ = 0;
  std::uint64_t rates_solved_ = 0;
  std::uint64_t epoch_ = 0;
  std::vector<int> pending_resources_;
  bool retime_scheduled_ = false;
  std::vector<double> egress_bytes_;
  std::vector<double> egress_across_;
  std::vector<double> egress_rate_;
  std::vector<double> ingress_rate_;
  std::function<void(Tick, int, double, double)> observer_;
};

}  // namespace tpsim

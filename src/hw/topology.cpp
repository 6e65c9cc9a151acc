#include "tpsim/hw/topology.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace tpsim {

Topology::Topology(const FabricSpec& spec, int gpus, double hbm_bytes_per_ps)
    : gpus_(gpus), per_node_(spec.topology == "multi_node" ? spec.gpus_per_node : gpus), routes_(static_cast<std::size_t>(gpus) * static_cast<std::size_t>(gpus)) {
  if (spec.topology == "switch" || spec.topology == "multi_node") build_switched_nodes(spec);
  else if (spec.topology == "pairs") build_pairs(spec);
  else if (spec.topology == "ring") build_ring(spec);
  else throw std::logic_error("unknown topology " + spec.topology);
  if (std::isfinite(hbm_bytes_per_ps)) add_hbm(hbm_bytes_per_ps);
}

// Appended after the links, so a route's first resource stays its first hop.
void Topology::add_hbm(double bytes_per_ps) {
  std::vector<int> hbm;
  first_memory_ = resources();
  for (int g = 0; g < gpus_; ++g) hbm.push_back(add(fmt::format("GPU {} HBM", g), bytes_per_ps));
  for (int s = 0; s < gpus_; ++s)
    for (int d = 0; d < gpus_; ++d)
      if (s != d) {
        auto& r = routes_[static_cast<std::size_t>(s * gpus_ + d)].resources;
        r.push_back(hbm[static_cast<std::size_t>(s)]);
        r.push_back(hbm[static_cast<std::size_t>(d)]);
      }
}

int Topology::add(const std::string& name, double capacity, bool network) {
  capacity_.push_back(capacity);
  names_.push_back(name);
  network_.push_back(network ? 1 : 0);
  return static_cast<int>(capacity_.size()) - 1;
}

double Topology::route_capacity(int src, int dst) const {
  double c = std::numeric_limits<double>::infinity();
  for (int r : route(src, dst).resources) c = std::min(c, capacity(r));
  return c;
}

double Topology::egress_capacity(int gpu) const {
  std::vector<int> first;
  for (int d = 0; d < gpus_; ++d) {
    if (d == gpu) continue;
    const int r = route(gpu, d).resources.front();
    if (std::find(first.begin(), first.end(), r) == first.end()) first.push_back(r);
  }
  double c = 0;
  for (int r : first) c += capacity(r);
  return c;
}

void Topology::build_pairs(const FabricSpec& spec) {
  std::vector<int> bridge_out, bridge_in, pcie_out, pcie_in;
  for (int g = 0; g < gpus_; ++g) {
    bridge_out.push_back(add(fmt::format("GPU {} NVLink bridge egress", g), spec.nvlink.bytes_per_ps));
    bridge_in.push_back(add(fmt::format("GPU {} NVLink bridge ingress", g), spec.nvlink.bytes_per_ps));
    pcie_out.push_back(add(fmt::format("GPU {} PCIe egress", g), spec.pcie.bytes_per_ps));
    pcie_in.push_back(add(fmt::format("GPU {} PCIe ingress", g), spec.pcie.bytes_per_ps));
  }
  for (int s = 0; s < gpus_; ++s)
    for (int d = 0; d < gpus_; ++d) {
      if (s == d) continue;
      auto& r = routes_[static_cast<std::size_t>(s * gpus_ + d)];
      if (s / 2 == d / 2) r = {{bridge_out[s], bridge_in[d]}, spec.nvlink.latency};
      else r = {{pcie_out[s], pcie_in[d]}, spec.pcie.latency};
    }
}

void Topology::build_ring(const FabricSpec& spec) {
  // Directed links g -> g+1 ("up") and g -> g-1 ("down").
  std::vector<int> up, down;
  for (int g = 0; g < gpus_; ++g) {
    up.push_back(add(fmt::format("NVLink {} -> {}", g, (g + 1) % gpus_), spec.nvlink.bytes_per_ps));
    down.push_back(add(fmt::format("NVLink {} -> {}", g, (g + gpus_ - 1) % gpus_), spec.nvlink.bytes_per_ps));
  }
  for (int s = 0; s < gpus_; ++s)
    for (int d = 0; d < gpus_; ++d) {
      if (s == d) continue;
      const int fwd = (d - s + gpus_) % gpus_;
      const bool go_up = fwd <= gpus_ - fwd;  // shorter way round; ties go up
      const int hops = go_up ? fwd : gpus_ - fwd;
      Route r;
      for (int h = 0, g = s; h < hops; ++h) {
        r.resources.push_back(go_up ? up[g] : down[g]);
        g = go_up ? (g + 1) % gpus_ : (g + gpus_ - 1) % gpus_;
      }
      r.latency = hops * spec.nvlink.latency;
      routes_[static_cast<std::size_t>(s * gpus_ + d)] = std::move(r);
    }
}

// NVSwitch inside each node of per_node_ GPUs (one node for "switch"), one NIC
// per GPU between nodes.
void Topology::build_switched_nodes(const FabricSpec& spec) {
  std::vector<int> out, in, nic_out, nic_in;
  const bool nodes = per_node_ < gpus_;
  for (int g = 0; g < gpus_; ++g) {
    out.push_back(add(fmt::format("GPU {} NVLink egress", g), spec.nvlink.bytes_per_ps));
    in.push_back(add(fmt::format("GPU {} NVLink ingress", g), spec.nvlink.bytes_per_ps));
    if (!nodes) continue;
    nic_out.push_back(add(fmt::format("GPU {} NIC egress", g), spec.nic.bytes_per_ps, true));
    nic_in.push_back(add(fmt::format("GPU {} NIC ingress", g), spec.nic.bytes_per_ps, true));
  }
  for (int s = 0; s < gpus_; ++s)
    for (int d = 0; d < gpus_; ++d) {
      if (s == d) continue;
      auto& r = routes_[static_cast<std::size_t>(s * gpus_ + d)];
      if (node_of(s) == node_of(d)) r = {{out[s], in[d]}, spec.nvlink.latency};
      else r = {{nic_out[s], nic_in[d]}, spec.nic.latency};
    }
}

}  // namespace tpsim

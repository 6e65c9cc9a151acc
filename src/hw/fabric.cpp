#include "tpsim/hw/fabric.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "tpsim/core/invariant.hpp"
#include "tpsim/hw/max_min.hpp"

namespace tpsim {

Fabric::Fabric(Simulator& sim, Topology topology)
    : sim_(sim), topo_(std::move(topology)),
      users_(static_cast<std::size_t>(topo_.resources())),
      egress_bytes_(static_cast<std::size_t>(topo_.gpus()), 0.0),
      egress_across_(egress_bytes_.size(), 0.0), egress_rate_(egress_bytes_.size(), 0.0), ingress_rate_(egress_bytes_.size(), 0.0) {}

Fabric::FlowId Fabric::start(int src, int dst, double bytes, double cap, std::function<void()> on_done, PayloadShare share) {
  if (src == dst || src < 0 || dst < 0 || src >= gpus() || dst >= gpus())
    throw std::logic_error("fabric transfer needs two distinct GPUs");
  if (!(share.link > 0 && share.link <= 1 && share.network > 0 && share.network <= 1))
    throw std::logic_error("fabric transfer's payload share outside (0, 1]");
  const FlowId id = static_cast<FlowId>(flows_.size());
  Flow f;
  f.src = src;
  f.dst = dst;
  f.total = f.remaining = bytes;
  f.cap = cap > 0 ? cap : std::numeric_limits<double>::infinity();
  f.wire = 1 / share.link;
  f.network_wire = 1 / share.network;
  f.on_done = std::move(on_done);
  flows_.push_back(std::move(f));
  bytes_started_ += bytes;
  const Tick latency = topo_.route(src, dst).latency;
  if (latency > 0) sim_.schedule_after(latency, [this, id] { activate(id); });
  else activate(id);
  return id;
}

const std::vector<int>& Fabric::path(FlowId id) const {
  const Flow& f = flows_[static_cast<std::size_t>(id)];
  return topo_.route(f.src, f.dst).resources;
}

// Bytes moved since the flow's rate last changed are booked lazily, so an event
// elsewhere in the fabric never touches this flow.
void Fabric::settle(Flow& f) {
  const double moved = std::min(f.remaining, f.rate * static_cast<double>(sim_.now() - f.since));
  f.remaining -= moved;
  egress_bytes_[static_cast<std::size_t>(f.src)] += moved;
  f.since = sim_.now();
}

void Fabric::activate(FlowId id) {
  flows_[static_cast<std::size_t>(id)].since = sim_.now();
  for (int r : path(id)) users_[static_cast<std::size_t>(r)].push_back(id);
  request_retime(path(id));
}

// Transfers that start or end at the same instant are re-timed together, once.
void Fabric::request_retime(const std::vector<int>& resources) {
  pending_resources_.insert(pending_resources_.end(), resources.begin(), resources.end());
  if (retime_scheduled_) return;
  retime_scheduled_ = true;
  sim_.schedule_after(0, [this] {
    retime_scheduled_ = false;
    std::vector<int> changed;
    changed.swap(pending_resources_);
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    retime(changed);
  });
}

std::vector<Fabric::FlowId> Fabric::component(const std::vector<int>& seeds) {
  std::vector<char> seen_resource(users_.size(), 0);
  std::vector<FlowId> flows;
  std::vector<int> stack(seeds.begin(), seeds.end());
  for (int r : seeds) seen_resource[static_cast<std::size_t>(r)] = 1;
  ++epoch_;
  while (!stack.empty()) {
    const int r = stack.back();
    stack.pop_back();
    for (FlowId f : users_[static_cast<std::size_t>(r)]) {
      Flow& flow = flows_[static_cast<std::size_t>(f)];
      if (flow.seen == epoch_) continue;
      flow.seen = epoch_;
      flows.push_back(f);
      for (int q : path(f))
        if (!seen_resource[static_cast<std::size_t>(q)]) seen_resource[static_cast<std::size_t>(q)] = 1, stack.push_back(q);
    }
  }
  std::sort(flows.begin(), flows.end());  // deterministic order whatever the search order
  return flows;
}

void Fabric::assign_max_min_rates(const std::vector<FlowId>& flows, std::vector<double>& rate) const {
  // Local indices for the resources these flows use, in order of first use.
  std::vector<double> capacity, cap;
  std::vector<int> resource_index;
  std::vector<std::vector<int>> local_path(flows.size());
  std::vector<double> local_use;  // per flow, per resource on its path
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const Flow& f = flows_[static_cast<std::size_t>(flows[i])];
    cap.push_back(f.cap);
    for (int r : path(flows[i])) {
      auto it = std::find(resource_index.begin(), resource_index.end(), r);
      const std::size_t k = static_cast<std::size_t>(it - resource_index.begin());
      if (it == resource_index.end()) resource_index.push_back(r), capacity.push_back(topo_.capacity(r));
      local_path[i].push_back(static_cast<int>(k));
      local_use.push_back(use(f, r));
    }
  }
  rate = max_min_rates_on_wire(local_path, std::move(capacity), cap, local_use);
}

void Fabric::check_capacity(const std::vector<FlowId>& flows, const std::vector<double>& rate) const {
  std::vector<std::pair<int, double>> load;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    if (!(rate[i] >= 0) || rate[i] > flows_[static_cast<std::size_t>(flows[i])].cap * (1 + 1e-9))
      throw InvariantViolation(fmt::format("transfer {} given rate {} beyond its own cap", flows[i], rate[i]));
    const Flow& f = flows_[static_cast<std::size_t>(flows[i])];
    for (int r : path(flows[i])) {
      auto it = std::find_if(load.begin(), load.end(), [r](const auto& l) { return l.first == r; });
      if (it == load.end()) load.emplace_back(r, rate[i] * use(f, r));
      else it->second += rate[i] * use(f, r);
    }
  }
  for (const auto& [r, total] : load)
    if (total > topo_.capacity(r) * (1 + 1e-9))
      throw InvariantViolation(fmt::format("{} carries {:.6g} bytes/ps, above its {:.6g}", topo_.name(r), total, topo_.capacity(r)));
}

// Only transfers that share a link (transitively) with the one that started or
// ended can change rate; the max-min solution elsewhere is untouched.
void Fabric::retime(const std::vector<int>& changed_resources) {
  const std::vector<FlowId> flows = component(changed_resources);
  std::vector<double> rate(flows.size(), 0.0);
  assign_max_min_rates(flows, rate);
  rates_solved_ += flows.size();
  check_capacity(flows, rate);
  std::vector<int> touched_gpus;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const FlowId id = flows[i];
    Flow& f = flows_[static_cast<std::size_t>(id)];
    if (rate[i] == f.rate && sim_.pending(f.done_event)) continue;
    settle(f);
    egress_rate_[static_cast<std::size_t>(f.src)] += rate[i] - f.rate;
    ingress_rate_[static_cast<std::size_t>(f.dst)] += rate[i] - f.rate;
    touched_gpus.push_back(f.src);
    touched_gpus.push_back(f.dst);
    f.rate = rate[i];
    sim_.cancel(f.done_event);
    f.done_event = sim_.schedule_after(duration_for(f.remaining, f.rate), [this, id] { finish(id); });
  }
  std::sort(touched_gpus.begin(), touched_gpus.end());
  touched_gpus.erase(std::unique(touched_gpus.begin(), touched_gpus.end()), touched_gpus.end());
  for (int g : touched_gpus) {
    // Sums of doubles drift; a port with nothing on it reports exactly zero.
    const auto gi = static_cast<std::size_t>(g);
    if (egress_rate_[gi] < 1e-15) egress_rate_[gi] = 0;
    if (ingress_rate_[gi] < 1e-15) ingress_rate_[gi] = 0;
    if (observer_) observer_(sim_.now(), g, egress_rate_[gi], ingress_rate_[gi]);
  }
}

void Fabric::finish(FlowId id) {
  Flow& f = flows_[static_cast<std::size_t>(id)];
  settle(f);
  // Rounding the completion time up can leave a sliver; the last byte lands now.
  egress_bytes_[static_cast<std::size_t>(f.src)] += f.remaining;
  f.remaining = 0;
  bytes_delivered_ += f.total;
  if (topo_.node_of(f.src) != topo_.node_of(f.dst)) egress_across_[static_cast<std::size_t>(f.src)] += f.total;
  egress_rate_[static_cast<std::size_t>(f.src)] -= f.rate;
  ingress_rate_[static_cast<std::size_t>(f.dst)] -= f.rate;
  f.rate = 0;
  for (int r : path(id)) {
    auto& u = users_[static_cast<std::size_t>(r)];
    u.erase(std::find(u.begin(), u.end(), id));
  }
  auto done = std::move(f.on_done);
  // The finished flow's own ports changed even when no other flow is left on them.
  for (int g : {f.src, f.dst}) {
    const auto gi = static_cast<std::size_t>(g);
    if (egress_rate_[gi] < 1e-15) egress_rate_[gi] = 0;
    if (ingress_rate_[gi] < 1e-15) ingress_rate_[gi] = 0;
    if (observer_) observer_(sim_.now(), g, egress_rate_[gi], ingress_rate_[gi]);
  }
  request_retime(path(id));
  if (done) done();
}

}  // namespace tpsim

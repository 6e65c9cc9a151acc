#include "tpsim/hw/fabric.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tpsim {

Fabric::Fabric(Simulator& sim, Topology topology)
    : sim_(sim), topo_(std::move(topology)),
      egress_bytes_(static_cast<std::size_t>(topo_.gpus()), 0.0),
      egress_rate_(egress_bytes_.size(), 0.0), ingress_rate_(egress_bytes_.size(), 0.0) {}

Fabric::FlowId Fabric::start(int src, int dst, double bytes, double cap, std::function<void()> on_done) {
  if (src == dst || src < 0 || dst < 0 || src >= gpus() || dst >= gpus())
    throw std::logic_error("fabric transfer needs two distinct GPUs");
  const FlowId id = static_cast<FlowId>(flows_.size());
  Flow f;
  f.src = src;
  f.dst = dst;
  f.total = f.remaining = bytes;
  f.cap = cap > 0 ? cap : std::numeric_limits<double>::infinity();
  f.on_done = std::move(on_done);
  flows_.push_back(std::move(f));
  bytes_started_ += bytes;
  const Tick latency = topo_.route(src, dst).latency;
  if (latency > 0) sim_.schedule_after(latency, [this, id] { activate(id); });
  else activate(id);
  return id;
}

void Fabric::activate(FlowId id) {
  advance_to_now();
  active_.push_back(id);
  retime();
}

void Fabric::advance_to_now() {
  const Tick dt = sim_.now() - last_advance_;
  last_advance_ = sim_.now();
  if (dt <= 0) return;
  for (FlowId id : active_) {
    Flow& f = flows_[static_cast<std::size_t>(id)];
    const double moved = std::min(f.remaining, f.rate * static_cast<double>(dt));
    f.remaining -= moved;
    egress_bytes_[static_cast<std::size_t>(f.src)] += moved;
  }
}

void Fabric::assign_max_min_rates() {
  std::vector<double> cap_left(static_cast<std::size_t>(topo_.resources()));
  for (int r = 0; r < topo_.resources(); ++r) cap_left[static_cast<std::size_t>(r)] = topo_.capacity(r);
  std::vector<int> users(cap_left.size(), 0);
  std::vector<FlowId> open = active_;
  for (FlowId id : open)
    for (int r : topo_.route(flows_[static_cast<std::size_t>(id)].src, flows_[static_cast<std::size_t>(id)].dst).resources)
      ++users[static_cast<std::size_t>(r)];
  std::vector<char> saturated(cap_left.size());
  while (!open.empty()) {
    // The lowest fair share over resources still in use, or the lowest own cap.
    double level = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < cap_left.size(); ++r)
      if (users[r] > 0) level = std::min(level, cap_left[r] / users[r]);
    for (FlowId id : open) level = std::min(level, flows_[static_cast<std::size_t>(id)].cap);
    const double tol = level * 1e-12;
    for (std::size_t r = 0; r < cap_left.size(); ++r) saturated[r] = users[r] > 0 && cap_left[r] / users[r] <= level + tol;
    std::vector<FlowId> still_open;
    for (FlowId id : open) {
      Flow& f = flows_[static_cast<std::size_t>(id)];
      const auto& path = topo_.route(f.src, f.dst).resources;
      const bool bottlenecked = f.cap <= level + tol ||
                                std::any_of(path.begin(), path.end(), [&](int r) { return saturated[static_cast<std::size_t>(r)] != 0; });
      if (!bottlenecked) {
        still_open.push_back(id);
        continue;
      }
      f.rate = level;
      for (int r : path) cap_left[static_cast<std::size_t>(r)] -= level, --users[static_cast<std::size_t>(r)];
    }
    open.swap(still_open);
  }
}

void Fabric::retime() {
  std::vector<double> old_rate;
  old_rate.reserve(active_.size());
  for (FlowId id : active_) old_rate.push_back(flows_[static_cast<std::size_t>(id)].rate);
  assign_max_min_rates();
  std::vector<double> out(egress_rate_.size(), 0.0), in(ingress_rate_.size(), 0.0);
  for (std::size_t a = 0; a < active_.size(); ++a) {
    const FlowId id = active_[a];
    Flow& f = flows_[static_cast<std::size_t>(id)];
    out[static_cast<std::size_t>(f.src)] += f.rate;
    in[static_cast<std::size_t>(f.dst)] += f.rate;
    // Only transfers whose rate changed need a new completion time.
    if (f.rate == old_rate[a] && sim_.pending(f.done_event)) continue;
    sim_.cancel(f.done_event);
    f.done_event = sim_.schedule_after(duration_for(f.remaining, f.rate), [this, id] { finish(id); });
  }
  for (std::size_t g = 0; g < out.size(); ++g) {
    if (out[g] == egress_rate_[g] && in[g] == ingress_rate_[g]) continue;
    egress_rate_[g] = out[g];
    ingress_rate_[g] = in[g];
    if (observer_) observer_(sim_.now(), static_cast<int>(g), out[g], in[g]);
  }
}

void Fabric::finish(FlowId id) {
  advance_to_now();
  Flow& f = flows_[static_cast<std::size_t>(id)];
  // Rounding the completion time up can leave a sliver; the last byte lands now.
  egress_bytes_[static_cast<std::size_t>(f.src)] += f.remaining;
  f.remaining = 0;
  bytes_delivered_ += f.total;
  active_.erase(std::find(active_.begin(), active_.end(), id));
  auto done = std::move(f.on_done);
  retime();
  if (done) done();
}

}  // namespace tpsim

#include "tpsim/hw/fabric.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tpsim {

Fabric::Fabric(Simulator& sim, int gpus, double port_bytes_per_ps)
    : sim_(sim), port_(port_bytes_per_ps),
      egress_bytes_(static_cast<std::size_t>(gpus), 0.0), egress_rate_(static_cast<std::size_t>(gpus), 0.0),
      ingress_rate_(static_cast<std::size_t>(gpus), 0.0) {}

Fabric::FlowId Fabric::start(int src, int dst, double bytes, double cap, std::function<void()> on_done) {
  if (src == dst || src < 0 || dst < 0 || src >= gpus() || dst >= gpus())
    throw std::logic_error("fabric flow needs two distinct GPUs of the node");
  advance_to_now();
  const FlowId id = static_cast<FlowId>(flows_.size());
  Flow f;
  f.src = src;
  f.dst = dst;
  f.total = f.remaining = bytes;
  f.cap = cap > 0 ? cap : std::numeric_limits<double>::infinity();
  f.active = true;
  f.on_done = std::move(on_done);
  flows_.push_back(std::move(f));
  active_.push_back(id);
  bytes_started_ += bytes;
  retime();
  return id;
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
  // Ports: [0, n) egress, [n, 2n) ingress.
  const int n = gpus();
  std::vector<double> cap_left(2 * static_cast<std::size_t>(n), port_);
  std::vector<int> users(2 * static_cast<std::size_t>(n), 0);
  std::vector<FlowId> open = active_;
  for (FlowId id : open) {
    const Flow& f = flows_[static_cast<std::size_t>(id)];
    ++users[static_cast<std::size_t>(f.src)];
    ++users[static_cast<std::size_t>(n + f.dst)];
  }
  while (!open.empty()) {
    double level = std::numeric_limits<double>::infinity();
    for (std::size_t p = 0; p < cap_left.size(); ++p)
      if (users[p] > 0) level = std::min(level, cap_left[p] / users[p]);
    for (FlowId id : open) level = std::min(level, flows_[static_cast<std::size_t>(id)].cap);
    const double tol = level * 1e-12;
    std::vector<FlowId> still_open;
    std::vector<char> saturated(cap_left.size(), 0);
    for (std::size_t p = 0; p < cap_left.size(); ++p)
      saturated[p] = users[p] > 0 && cap_left[p] / users[p] <= level + tol;
    for (FlowId id : open) {
      Flow& f = flows_[static_cast<std::size_t>(id)];
      const auto e = static_cast<std::size_t>(f.src), i = static_cast<std::size_t>(n + f.dst);
      if (f.cap <= level + tol || saturated[e] || saturated[i]) {
        f.rate = level;
        cap_left[e] -= level, cap_left[i] -= level;
        --users[e], --users[i];
      } else {
        still_open.push_back(id);
      }
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
  // Rounding up the completion time can leave a sliver; the last byte lands now.
  egress_bytes_[static_cast<std::size_t>(f.src)] += f.remaining;
  f.remaining = 0;
  f.active = false;
  bytes_delivered_ += f.total;
  active_.erase(std::find(active_.begin(), active_.end(), id));
  auto done = std::move(f.on_done);
  retime();
  if (done) done();
}

}  // namespace tpsim

#pragma once
// The node fabric: every GPU has one NVLink egress and one ingress port of fixed
// payload bandwidth (NVSwitch gives every pair a path). Concurrent transfers share
// the ports max-min fairly (progressive filling), each also capped by its own
// rate (a copy engine, a protocol). Whenever a transfer starts or ends, rates are
// recomputed and in-flight completions re-timed; bytes are conserved.
#include <cstdint>
#include <functional>
#include <vector>

#include "tpsim/core/simulator.hpp"

namespace tpsim {

class Fabric {
 public:
  using FlowId = int;

  Fabric(Simulator& sim, int gpus, double port_bytes_per_ps);

  FlowId start(int src, int dst, double bytes, double rate_cap_bytes_per_ps, std::function<void()> on_done);

  int gpus() const { return static_cast<int>(egress_bytes_.size()); }
  double rate(FlowId id) const { return flows_[static_cast<std::size_t>(id)].rate; }
  double bytes_started() const { return bytes_started_; }
  double bytes_delivered() const { return bytes_delivered_; }
  // Integral of egress rate over time, per GPU: equals the bytes it sent.
  double egress_bytes(int gpu) const { return egress_bytes_[static_cast<std::size_t>(gpu)]; }
  double port_bytes_per_ps() const { return port_; }
  // Called with (now, gpu, egress bytes/ps, ingress bytes/ps) whenever either changes.
  void set_rate_observer(std::function<void(Tick, int, double, double)> obs) { observer_ = std::move(obs); }

 private:
  struct Flow {
    int src = 0, dst = 0;
    double total = 0, remaining = 0, rate = 0, cap = 0;
    bool active = false;
    EventHandle done_event;
    std::function<void()> on_done;
  };

  void advance_to_now();
  void retime();
  void assign_max_min_rates();
  void finish(FlowId id);

  Simulator& sim_;
  double port_;
  std::vector<Flow> flows_;
  std::vector<FlowId> active_;
  Tick last_advance_ = 0;
  double bytes_started_ = 0, bytes_delivered_ = 0;
  std::vector<double> egress_bytes_;
  std::vector<double> egress_rate_;
  std::vector<double> ingress_rate_;
  std::function<void(Tick, int, double, double)> observer_;
};

}  // namespace tpsim

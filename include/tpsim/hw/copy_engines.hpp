#pragma once
// A GPU's copy engines for peer copies. The driver hands peer copies to a fixed
// set of engines (by direction), so copies from different streams queue behind
// one another instead of overlapping. An engine uses no SMs: after its start-up
// latency it moves the bytes over the fabric at up to its own peak rate.
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "tpsim/core/simulator.hpp"
#include "tpsim/hw/fabric.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

struct CopyRequest {
  int src = 0, dst = 0;
  double bytes = 0;
  std::function<void(int engine)> on_start;  // engine taken (latency starts)
  std::function<void()> on_done;
};

class CopyEngines {
 public:
  CopyEngines(Simulator& sim, Fabric& fabric, const CopyEngineSpec& spec);
  void submit(CopyRequest req);
  int engines() const { return static_cast<int>(queues_.size()); }

 private:
  void start_next(int engine);

  Simulator& sim_;
  Fabric& fabric_;
  CopyEngineSpec spec_;
  std::vector<std::deque<CopyRequest>> queues_;
  std::vector<char> busy_;
};

}  // namespace tpsim

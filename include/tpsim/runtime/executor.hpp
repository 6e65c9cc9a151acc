#pragma once
// Runs a DAG on the simulated node with CUDA semantics: each rank's host thread
// enqueues its ops in program order (paying a launch overhead per kernel or copy);
// streams run their ops in order; a wait holds its stream until the recorded
// event fires; kernels go to the rank's block scheduler after the device launch
// latency, copies to its copy engines; collectives and barriers rendezvous across
// ranks. Every rank of the group is simulated together.
#include <stdexcept>

#include "tpsim/dag/dag.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/runtime/timeline.hpp"

namespace tpsim {

// Raised when the DAG cannot finish (a rendezvous some rank never reaches, ...).
class StuckError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `detailed`: also keep counter samples and per-op details (what a trace shows);
// without them memory does not grow with simulated time beyond one record per op.
Timeline execute(const Dag& dag, const HardwareSpec& hw, bool detailed = true);

}  // namespace tpsim

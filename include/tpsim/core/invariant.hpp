#pragma once
// A broken physical invariant (an SM holding more than it has, a link carrying
// more than its bandwidth, bytes lost, an op before its dependency): always a
// bug in tpsim, never the user's input. The CLI reports it as an internal error.
#include <stdexcept>
#include <string>

namespace tpsim {

class InvariantViolation : public std::logic_error {
 public:
  explicit InvariantViolation(const std::string& what) : std::logic_error("invariant violated: " + what) {}
};

// A run that would not end, or would not fit in memory: the simulation stops.
class SimulationLimit : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tpsim

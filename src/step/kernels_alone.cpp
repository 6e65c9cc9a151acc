#include "tpsim/step/kernels_alone.hpp"

#include "tpsim/analysis/metrics.hpp"
#include "tpsim/runtime/executor.hpp"

namespace tpsim {

Tick kernels_alone(const std::vector<std::pair<std::string, OpPayload>>& ops, const HardwareSpec& hw) {
  if (ops.empty()) return 0;
  Dag dag(1);
  for (const auto& [name, op] : ops) dag.add(0, 0, name, op);
  return analyze(dag, execute(dag, hw, false)).makespan;
}

}  // namespace tpsim

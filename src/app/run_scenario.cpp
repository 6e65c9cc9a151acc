#include "tpsim/app/run_scenario.hpp"

#include "tpsim/runtime/executor.hpp"
#include "tpsim/io/workload_kinds.hpp"

namespace tpsim {

std::optional<double> RunResult::speedup(const VariantRun& run) const {
  for (const auto& r : runs)
    if (r.variant == "baseline" && run.metrics.makespan > 0)
      return static_cast<double>(r.metrics.makespan) / static_cast<double>(run.metrics.makespan);
  return std::nullopt;
}

RunResult run_scenario(const Scenario& s, bool detailed) {
  RunResult result{s, {}};
  for (const std::string& v : s.variants) {
    Dag dag = build_dag(s, v);
    Timeline tl = execute(dag, s.hardware, detailed);
    VariantMetrics m = analyze(dag, tl);
    result.runs.push_back(VariantRun{v, std::move(dag), std::move(tl), std::move(m)});
  }
  return result;
}

}  // namespace tpsim

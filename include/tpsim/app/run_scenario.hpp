#pragma once
// One scenario, every requested variant: build each DAG, simulate it, analyse it.
#include <optional>
#include <string>
#include <vector>

#include "tpsim/analysis/metrics.hpp"
#include "tpsim/dag/dag.hpp"
#include "tpsim/runtime/timeline.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

struct VariantRun {
  std::string variant;
  Dag dag;
  Timeline timeline;
  VariantMetrics metrics;
};

struct RunResult {
  Scenario scenario;
  std::vector<VariantRun> runs;
  // Baseline makespan / this variant's makespan (>1: faster), when baseline ran.
  std::optional<double> speedup(const VariantRun& run) const;
};

// `detailed`: keep what a Chrome trace needs (counter samples, op details).
RunResult run_scenario(const Scenario& s, bool detailed = true);

}  // namespace tpsim

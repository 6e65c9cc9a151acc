#pragma once
// Test helpers: the compute a simulated training step's program holds, to check that a
// schedule or a split moves work without making or losing any.
#include <cmath>

#include "tpsim/step/training_step.hpp"

namespace tpsim::test {

// The layers' compute over every stage. Each stage's optimizer step is left out: it runs
// PyTorch's launches over its own shard, so re-partitioning the parameters moves a launch or
// two per pass (optimizer_launch_spread bounds that).
inline Tick total_compute(const StepVariantRun& r) {
  Tick t = 0;
  for (const auto& task : r.plan.program.tasks)
    if (!task.communication && task.name.rfind("optimizer", 0) != 0) t += task.work;
  return t;
}

// The optimizer steps over every stage.
inline Tick optimizer_compute(const StepVariantRun& r) {
  Tick t = 0;
  for (const auto& task : r.plan.program.tasks)
    if (task.name.rfind("optimizer", 0) == 0) t += task.work;
  return t;
}

// Two partitions of the same parameters differ by at most a launch of each pass per stage.
inline bool optimizer_launch_spread(const StepVariantRun& a, const StepVariantRun& b) {
  const double stages = static_cast<double>(a.plan.stages.size());
  const double apart = std::abs(static_cast<double>(optimizer_compute(a) - optimizer_compute(b)));
  return apart <= stages * 11 * 5e6;  // 11 passes (clipping and foreach AdamW), a launch of 5 us each
}

}  // namespace tpsim::test

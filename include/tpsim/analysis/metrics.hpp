#pragma once
// What a run means: makespan, exposed communication, utilizations and the
// critical path, computed from the DAG and its timeline.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tpsim/dag/dag.hpp"
#include "tpsim/runtime/timeline.hpp"

namespace tpsim {

struct CriticalPath {
  std::vector<OpId> ops;                  // first to last
  std::map<std::string, Tick> by_kind;    // time each op kind contributes ("gemm", "copy", ..., "host", "launch", "queued")
};

struct VariantMetrics {
  Tick first_start = 0;
  Tick last_end = 0;
  Tick makespan = 0;
  Tick exposed_comm = 0;       // mean over ranks: communication/sync time with no compute kernel running
  // Absent for a measured run: CUDA events time ops, not SMs or link bytes.
  std::optional<double> sm_utilization;    // busy SM-time / (SMs x makespan), mean over ranks
  std::optional<double> link_utilization;  // egress bytes / (all egress links' bandwidth x makespan), mean over ranks
  double flops = 0;            // total over ranks
  CriticalPath critical_path;
};

VariantMetrics analyze(const Dag& dag, const Timeline& tl);

// Union length of [start, end) intervals.
Tick union_length(std::vector<std::pair<Tick, Tick>> intervals);
// Length of a minus (a intersect b), both unions of intervals.
Tick uncovered_length(std::vector<std::pair<Tick, Tick>> a, std::vector<std::pair<Tick, Tick>> b);

}  // namespace tpsim

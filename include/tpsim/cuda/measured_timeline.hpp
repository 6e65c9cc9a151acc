#pragma once
// Result assembly for the CUDA backend, on the host: per-op CUDA-event times of
// every repeat become one Timeline (the median start and end of each op), so a
// measured run is analysed, written as result JSON and drawn as a Chrome trace
// by the same code as a simulated one.
#include <map>
#include <vector>

#include "tpsim/dag/dag.hpp"
#include "tpsim/runtime/timeline.hpp"

namespace tpsim {

struct OpSample {
  double start_ms = 0, end_ms = 0;  // since the rank's start event, which every rank records after a common barrier
};

// repeats[r][op]: one sample per op of the DAG. Throws std::invalid_argument when
// a repeat has the wrong size, a time is negative or an op ends before it starts.
// Ops in `stand_ins` (op -> simulated us) were stood in for and are marked so.
Timeline measured_timeline(const Dag& dag, const std::vector<std::vector<OpSample>>& repeats, const std::vector<int>& sm_count,
                           const std::map<OpId, double>& stand_ins = {});

// The median span (end - start) of one op over the repeats, in microseconds.
double median_span_us(const std::vector<std::vector<OpSample>>& repeats, OpId op, bool from_zero);
// The same from the first of `ops` to start to the last to end (ops run side by side).
double median_span_us(const std::vector<std::vector<OpSample>>& repeats, const std::vector<OpId>& ops, bool from_zero);

}  // namespace tpsim

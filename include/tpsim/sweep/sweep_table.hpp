#pragma once
// The sweep's CSV: one row per point and variant, in point order, with a fixed
// number format so that the same sweep always gives the same bytes.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "tpsim/app/run_scenario.hpp"
#include "tpsim/step/training_step.hpp"
#include "tpsim/sweep/sweep_spec.hpp"

namespace tpsim {

// Columns: point, one per axis, the metrics, and `sweep`: the sweep's identity (what
// it simulates, including the contents of every file it reads, "/" its point count),
// the same in every shard, so `merge` can tell a complete set of shards of one sweep.
std::string sweep_csv_header(const SweepSpec& spec);
// The CSV lines of one simulated point (each ending in '\n').
std::string sweep_csv_rows(const SweepSpec& spec, std::int64_t point, const RunResult& result, const std::string& sweep_id);

// A sweep over training steps (its base is a training_step) has its own metric columns.
bool is_training_sweep(const SweepSpec& spec);
std::string sweep_step_csv_rows(const SweepSpec& spec, std::int64_t point, const StepResult& result, const std::string& sweep_id);

// Splits one CSV line (RFC 4180 quoting). Returns false on a malformed line.
bool split_csv_line(const std::string& line, std::vector<std::string>& fields);

// A Markdown table of speedups over baseline per point (or makespans when no
// baseline ran), with the best variant per row, read from a sweep CSV.
std::string sweep_markdown(std::istream& csv);

}  // namespace tpsim

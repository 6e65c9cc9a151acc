#pragma once
// Runs a sweep's points on a pool of threads and appends their rows to the CSV
// in point order as soon as every earlier point is done. The CSV is therefore
// always a valid prefix of the final file: a killed sweep (even kill -9) loses
// only the points in flight, and the same command resumes after the last whole
// point. A `<csv>.progress` file marks an unfinished run and names its sweep.
#include <cstdint>
#include <iosfwd>
#include <string>

#include "tpsim/sweep/sweep_spec.hpp"

namespace tpsim {

struct SweepOptions {
  std::string output = "results.csv";
  std::string markdown;        // empty: none
  int jobs = 0;                // 0: every core
  int shard_index = 0;         // run points with index % shard_count == shard_index
  int shard_count = 1;
  bool progress = false;       // progress bar on stderr
  std::int64_t kill_after = 0; // testing: SIGKILL itself after this many points (0: never)
};

struct SweepSummary {
  std::int64_t points = 0;     // in this shard
  std::int64_t resumed = 0;    // already in the CSV when it started
  std::int64_t simulated = 0;
};

// Parses every point's scenario first (bad points are reported before any work).
SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options, std::ostream& progress_out);

// Joins shard CSVs of one sweep into one, in point order (= the unsharded file).
void merge_sweep_csvs(const std::vector<std::string>& inputs, const std::string& output);

void write_markdown_from_csv(const std::string& csv, const std::string& markdown);

}  // namespace tpsim

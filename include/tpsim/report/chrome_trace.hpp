#pragma once
// Chrome Trace Event Format (opens in Perfetto UI and chrome://tracing): one
// process per (variant, GPU), a track per stream and per copy engine, a complete
// event per op, counters for busy SMs and NVLink egress, and flow arrows for
// cross-stream (event) and cross-rank (rendezvous) dependencies.
#include <cstdint>
#include <set>

#include "tpsim/app/run_scenario.hpp"
#include "tpsim/io/json_reader.hpp"
#include "tpsim/io/output_file.hpp"

namespace tpsim {

// full: ops, busy-SM and NVLink counters, dependency arrows; ops: the ops alone.
enum class TraceDetail { full, ops };

struct TraceOptions {
  TraceDetail detail = TraceDetail::full;
  std::set<int> ranks;  // empty: every rank
  bool shows(int rank) const { return ranks.empty() || ranks.contains(rank); }
};

// The whole trace in memory (tests, small runs).
Json chrome_trace(const RunResult& r, const TraceOptions& options = {});
// The same bytes (plus a final newline), written event by event: memory stays flat.
void write_chrome_trace(const RunResult& r, const TraceOptions& options, OutputStream& out);
// How many events the trace will have, known before writing it (to refuse a huge one).
std::int64_t trace_event_estimate(const RunResult& r, const TraceOptions& options);

// About 2-4 GB of JSON: past it write_trace_file refuses, saying how to trace less.
inline constexpr std::int64_t kMaxTraceEvents = 20'000'000;

// Checks the size, then streams the trace to `path` atomically ("-": standard output).
void write_trace_file(const std::string& path, const RunResult& r, const TraceOptions& options,
                      std::int64_t max_events = kMaxTraceEvents);

// "0,1,5" -> ranks to trace; every rank must exist in a group of `gpus`.
std::set<int> parse_trace_ranks(const std::string& list, int gpus);

}  // namespace tpsim

#pragma once
// Chrome Trace Event Format (opens in Perfetto UI and chrome://tracing): one
// process per (variant, GPU), a track per stream and per copy engine, a complete
// event per op, counters for busy SMs and NVLink egress, and flow arrows for
// cross-stream (event) and cross-rank (rendezvous) dependencies.
#include "tpsim/app/run_scenario.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim {

Json chrome_trace(const RunResult& r);

}  // namespace tpsim

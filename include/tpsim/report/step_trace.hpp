#pragma once
// A training step as a Chrome trace (Perfetto): per variant and simulated rank (one
// per pipeline stage) a track per stream, every task a complete event named by what
// it is (`layer3.forward.mb0`, `fsdp.all_gather.layer3`, `dp.all_reduce.layer3`,
// `pp.send.activations.chunk0.mb1` ...), and per rank a counter of NVLink and NIC
// traffic.
#include <string>

#include "tpsim/io/json_reader.hpp"
#include "tpsim/io/output_file.hpp"
#include "tpsim/step/training_step.hpp"

namespace tpsim {

Json step_trace(const StepResult& r);
// The same bytes (plus a final newline), written event by event.
void write_step_trace(const StepResult& r, OutputStream& out);
// Streams the trace to `path` atomically ("-": standard output).
void write_step_trace_file(const std::string& path, const StepResult& r);

}  // namespace tpsim

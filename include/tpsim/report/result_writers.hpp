#pragma once
#include <map>
#include <string>
// Results for people (a table) and for programs (JSON). Deterministic: the same
// run gives byte-identical output.
#include <string>

#include "tpsim/app/run_scenario.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim {

std::string format_table(const RunResult& r);
Json result_json(const RunResult& r);
// Every op but events with its start and end (what `tpsim measure` adds per variant as "op_times",
// and `tpsim calibrate` fits to).
Json op_times_json(const VariantRun& run, const std::map<OpId, std::string>& kernels = {});

}  // namespace tpsim

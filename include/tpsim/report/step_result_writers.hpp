#pragma once
// A training step's results for people (a table with the memory ledger) and for
// programs (JSON). Deterministic: the same run gives byte-identical output.
#include <string>

#include "tpsim/io/json_reader.hpp"
#include "tpsim/step/training_step.hpp"

namespace tpsim {

std::string format_step_table(const StepResult& r);
Json step_result_json(const StepResult& r);

}  // namespace tpsim

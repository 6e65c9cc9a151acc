#pragma once
// A measured run next to the simulation of the same scenario: one table of
// measured vs simulated times, and one result whose variants come in pairs
// ("baseline measured", "baseline simulated") so a single Chrome trace shows
// both timelines, one above the other, in Perfetto.
#include <string>

#include "tpsim/app/run_scenario.hpp"

namespace tpsim {

// Both results must hold the same variants in the same order (std::invalid_argument otherwise).
RunResult side_by_side(RunResult measured, RunResult simulated);  // runs hold their DAGs: moved, not copied
// Makespan and speedup per variant, then device time per op kind (stand-ins left out).
std::string format_comparison(const RunResult& measured, const RunResult& simulated);

}  // namespace tpsim

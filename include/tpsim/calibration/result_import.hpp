#pragma once
// A `tpsim measure` (or `tpsim run --json`) result as measurements: each
// variant's makespan, to be re-simulated with the candidate hardware.
#include <string>
#include <vector>

#include "tpsim/calibration/measurement.hpp"

namespace tpsim {

std::vector<Measurement> import_result_json(const Json& j, const std::string& source);

}  // namespace tpsim

#pragma once
// Numbers and headers every result writer prints the same way.
#include <cmath>

#include <nlohmann/json.hpp>

#include "tpsim/core/tick.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

// Rounded to `decimals` places so printed JSON stays short and stable (3 places of us = 1 ns).
// Dividing the rounded integer by an exact power of ten gives the double nearest the
// decimal, which JSON prints as written (multiplying back by 1e-4 would not: 1.4984000000000002).
inline double round_to(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

// A trace timestamp: microseconds at nanosecond resolution.
inline double trace_us(Tick t) { return std::round(static_cast<double>(t) / 1e3) / 1e3; }

// What every result JSON starts with: the scenario as run.
inline nlohmann::json scenario_header_json(const Scenario& s) {
  nlohmann::json j;
  j["scenario"] = s.name;
  j["hardware"] = s.hardware.name;
  j["gpus"] = s.gpus;
  j["dtype"] = std::string(dtype_name(s.dtype));
  j["workload"] = s.workload_json;
  return j;
}

}  // namespace tpsim

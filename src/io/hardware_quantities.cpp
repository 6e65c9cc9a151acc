#include "hardware_quantities.hpp"

#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tpsim::hardware_file {

namespace {

// Conversion factors into simulator units, per dimension.
const std::map<std::string, std::map<std::string, double>>& unit_table() {
  static const std::map<std::string, std::map<std::string, double>> table = {
      {"count", {{"count", 1.0}}},
      {"fraction", {{"fraction", 1.0}}},
      {"bytes", {{"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"MB", 1e6}, {"GiB", 1073741824.0}, {"GB", 1e9}}},
      {"ratio", {{"ratio", 1.0}}},
      {"time", {{"ns", 1e3}, {"us", 1e6}}},                          // -> ps
      {"bandwidth", {{"GB/s", 1e9 / 1e12}, {"TB/s", 1e12 / 1e12}}},  // -> bytes/ps
      {"flops", {{"TFLOP/s", 1e12 / 1e12}}},                         // -> FLOP/ps
      {"throughput", {{"Gelem/s", 1e9 / 1e12}}},                     // -> elements/ps
      {"power", {{"W", 1.0}}},
  };
  return table;
}

// Bounds in simulator units beyond which a value is a typo, not hardware: they keep
// absurd inputs (1e-8 GB/s NVLink, 1e300 us overheads) from giving plausible nonsense.
std::pair<double, double> physical_range(const std::string& dimension) {
  if (dimension == "time") return {1.0, 1e12};             // 1 ps .. 1 s
  if (dimension == "bandwidth") return {1e-4, 100.0};      // 0.1 GB/s .. 100 TB/s
  if (dimension == "flops") return {0.1, 1e5};             // 0.1 .. 100000 TFLOP/s
  if (dimension == "bytes") return {1.0, 1e12};
  if (dimension == "fraction") return {1e-3, 1.0};
  if (dimension == "throughput") return {1e-5, 10.0};      // 0.01 .. 10000 G elements/s (per SM)
  if (dimension == "ratio") return {1.0, 64.0};
  if (dimension == "power") return {10.0, 1e5};            // 10 W .. 100 kW (a board, not a rack)
  return {1.0, 1e9};                                       // counts (each key has its own tighter limit)
}

}  // namespace

double Quantities::get(const std::string& key, const std::string& dimension) const {
  const ObjectReader q = r_.object(key, {"value", "unit", "source"});
  const Json& v = q.at("value");
  if (!v.is_number()) fail_at(q.child_path("value"), fmt::format("must be a number, got {}", v.type_name()));
  const double value = v.get<double>();
  if (!std::isfinite(value) || value <= 0) fail_at(q.child_path("value"), fmt::format("must be positive, got {}", v.dump()));
  const std::string unit = q.string("unit");
  const auto& units = unit_table().at(dimension);
  const auto it = units.find(unit);
  if (it == units.end()) {
    std::vector<std::string> names;
    for (const auto& [name, f] : units) names.push_back(name);
    fail_at(q.child_path("unit"), fmt::format("unit \"{}\" is not a {} unit (use one of: {})", unit, dimension, fmt::join(names, ", ")));
  }
  if (q.string("source").empty()) fail_at(q.child_path("source"), "must say where the number comes from");
  if (dimension == "fraction" && value > 1.0) fail_at(q.child_path("value"), "a fraction must be at most 1");
  const double converted = value * it->second;
  const auto [lo, hi] = physical_range(dimension);
  if (converted < lo || converted > hi)
    fail_at(q.child_path("value"), fmt::format("{} {} is outside what any GPU system has ({:g} to {:g} {})", v.dump(), unit,
                                               lo / it->second, hi / it->second, unit));
  return converted;
}

int Quantities::count(const std::string& key, int max) const {
  const double v = get(key, "count");
  if (v != std::floor(v)) fail_at(r_.child_path(key) + ".value", "must be a whole number");
  if (v > max) fail_at(r_.child_path(key) + ".value", fmt::format("{:g} is more than the physical limit {}", v, max));
  return static_cast<int>(v);
}

Tick Quantities::time(const std::string& key) const { return static_cast<Tick>(std::llround(get(key, "time"))); }
int Quantities::bytes(const std::string& key) const { return static_cast<int>(std::llround(get(key, "bytes"))); }

}  // namespace tpsim::hardware_file

#include "tpsim/calibration/result_import.hpp"

#include <filesystem>

#include <fmt/format.h>

namespace tpsim {

namespace {

const Json& required(const Json& j, const std::string& key, const std::string& path) {
  if (!j.is_object()) fail_at(path, "must be an object");
  if (!j.contains(key)) fail_at(path, fmt::format("missing required key \"{}\"", key));
  return j[key];
}

}  // namespace

std::vector<Measurement> import_result_json(const Json& j, const std::string& source) {
  // Output of tpsim itself: read the keys calibration needs, ignore the metrics.
  Json scenario = Json::object();
  scenario["name"] = as_string(required(j, "scenario", "$"), "$.scenario");
  scenario["hardware"] = as_string(required(j, "hardware", "$"), "$.hardware");
  scenario["gpus"] = required(j, "gpus", "$");
  scenario["dtype"] = required(j, "dtype", "$");
  scenario["workload"] = required(j, "workload", "$");
  const Json& results = required(j, "results", "$");
  if (!results.is_array()) fail_at("$.results", "must be an array");
  const std::string base_dir = std::filesystem::path(source).parent_path().string();
  const std::string measured_on = j.contains("measured_on") && j["measured_on"].is_string() ? j["measured_on"].get<std::string>() : "";
  std::vector<Measurement> out;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string path = fmt::format("$.results[{}]", i);
    const std::string variant = as_string(required(results[i], "variant", path), path + ".variant");
    scenario["variants"] = Json::array({variant});
    Measurement m;
    m.kind = MeasurementKind::scenario;
    m.origin = fmt::format("{} {}", source, path);
    m.source = measured_on.empty() ? source : measured_on;
    try {
      m.scenario = std::make_shared<const Scenario>(parse_scenario(scenario, base_dir));
    } catch (const InputError& e) {
      std::string msg = e.what();
      if (msg.starts_with("$")) msg = "$ (as a scenario)" + msg.substr(1);
      throw InputError(msg);
    }
    m.time_us = as_positive_number(required(results[i], "makespan_us", path), path + ".makespan_us");
    m.name = fmt::format("{} {}", m.scenario->name, variant);
    out.push_back(std::move(m));
  }
  if (out.empty()) fail_at("$.results", "holds no variant");
  return out;
}

}  // namespace tpsim

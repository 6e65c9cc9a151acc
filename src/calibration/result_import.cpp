#include "tpsim/calibration/result_import.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/io/workload_kinds.hpp"

namespace tpsim {

namespace {

const Json& required(const Json& j, const std::string& key, const std::string& path) {
  if (!j.is_object()) fail_at(path, "must be an object");
  if (!j.contains(key)) fail_at(path, fmt::format("missing required key \"{}\"", key));
  return j[key];
}

// Per-op medians of a measured run (`tpsim measure` writes them): each op's device
// time is a measurement in the scenario's context; together they weigh as much as its makespan.
void import_ops(const Json& ops, const std::string& path, const Measurement& whole, std::vector<Measurement>& out) {
  if (!ops.is_array()) fail_at(path, "must be an array");
  const Dag dag = build_dag(*whole.scenario, whole.scenario->variants.front());
  std::vector<Measurement> timed;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const std::string p = fmt::format("{}[{}]", path, k);
    const ObjectReader r(ops[k], p, {"rank", "stream", "op", "kind", "start_us", "end_us", "stand_in", "kernel"});
    if (const auto stand_in = r.optional_bool("stand_in"); stand_in && *stand_in) continue;  // its time was simulated
    Measurement m = whole;
    m.op = r.string("op");
    const Json& rank = r.at("rank");
    if (!rank.is_number_integer() || rank.get<std::int64_t>() < 0 || rank.get<std::int64_t>() >= dag.ranks())
      fail_at(r.child_path("rank"), fmt::format("must be an integer from 0 to {}", dag.ranks() - 1));
    m.op_rank = rank.get<int>();
    m.origin = p;
    try {
      find_named_op(dag, m);
    } catch (const InputError&) {
      fail_at(r.child_path("op"), fmt::format("variant \"{}\" has no op \"{}\" on rank {}", whole.scenario->variants.front(), m.op, m.op_rank));
    }
    const Json& start = r.at("start_us");
    const Json& end = r.at("end_us");
    if (!start.is_number() || !end.is_number() || !(end.get<double>() >= start.get<double>()) || !(start.get<double>() >= 0))
      fail_at(p, "needs numbers 0 <= start_us <= end_us");
    m.time_us = end.get<double>() - start.get<double>();
    if (m.time_us <= 0) continue;  // events and empty ops carry no duration to fit
    m.name = fmt::format("{} rank{}:{}", whole.name, m.op_rank, m.op);
    timed.push_back(std::move(m));
  }
  for (auto& m : timed) {
    m.weight = whole.weight / static_cast<double>(timed.size());
    out.push_back(std::move(m));
  }
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
  if (j.contains("software")) scenario["software"] = j["software"];  // results before it existed ran the default
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
    // A makespan with stand-ins holds simulated time: only the ops the GPU ran are measurements.
    const Json& stand_ins = results[i].value("stand_in_ops", Json(0));
    if (!stand_ins.is_number_integer() || stand_ins.get<std::int64_t>() < 0)
      fail_at(path + ".stand_in_ops", "must be a count of ops");
    if (stand_ins.get<std::int64_t>() == 0) out.push_back(m);
    if (results[i].contains("op_times")) import_ops(results[i]["op_times"], path + ".op_times", m, out);
  }
  if (out.empty()) fail_at("$.results", "holds no variant");
  return out;
}

}  // namespace tpsim

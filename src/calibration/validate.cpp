#include "tpsim/calibration/validate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/workload_kinds.hpp"

namespace tpsim {

namespace {

double error_of(double predicted, const Measurement& m) { return predicted / m.time_us - 1; }

double to_ns(double us) { return std::round(us * 1000) / 1000; }  // JSON: microseconds to the nanosecond

std::string percent(double e) { return fmt::format("{:+.1f}%", 100 * e); }

}  // namespace

bool fittable(const Measurement& m) {
  // What HBM a copy engine gets beside SMs that want all of it has no parameter yet: fitted,
  // these rows would move the rate of copies alone.
  if (m.kind == MeasurementKind::peer_copy_with_gemm) return false;
  if (m.kind != MeasurementKind::scenario || !m.op.empty()) return true;
  // A makespan is op-level only when it is one collective and one GEMM in sequence.
  return m.scenario->variants.front() == "baseline" && workload_kind(m.scenario->workload).op_level;
}

Validation validate(const ValidationRequest& req) {
  if (req.files.empty()) throw InputError("validate: give at least one measurement file");
  Validation v;
  for (const std::string& f : req.files) {
    auto ms = load_measurements_file(f);
    v.measurements.insert(v.measurements.end(), ms.begin(), ms.end());
    v.files.insert(v.files.end(), ms.size(), std::filesystem::path(f).filename().string());
  }
  const std::string file = hardware_file_path(req.hardware, "--hardware", "");
  Json start = resolve_hardware_json(file);
  const HardwareSpec hw = parse_hardware(start, file);
  check_hardware_serves(v.measurements, hw);
  if (auto note = burst_clock_note(v.measurements, hw)) v.notes.push_back(*note);
  if (auto note = l2_start_note(v.measurements, hw)) v.notes.push_back(*note);
  v.predicted_us = predict_all_us(v.measurements, hw);
  if (!req.cross_validate) return v;

  start.erase("base");
  const auto parameters =
      load_calibration_parameters(req.parameters_file.empty() ? default_calibration_parameters_file() : req.parameters_file);
  for (const auto& m : v.measurements)
    if (std::find(v.sources.begin(), v.sources.end(), m.source) == v.sources.end()) v.sources.push_back(m.source);
  v.held_out_us.assign(v.measurements.size(), 0.0);
  for (const std::string& source : v.sources) {
    std::vector<Measurement> train, test;
    std::vector<std::size_t> test_index;
    for (std::size_t i = 0; i < v.measurements.size(); ++i) {
      const Measurement& m = v.measurements[i];
      if (m.source == source) test.push_back(m), test_index.push_back(i);
      else if (fittable(m)) train.push_back(m);
    }
    Json hardware = start;
    if (!train.empty()) fit_hardware(hardware, train, parameters, req.fit);
    const auto predicted = predict_all_us(test, parse_hardware(hardware, file));
    for (std::size_t j = 0; j < test.size(); ++j) v.held_out_us[test_index[j]] = predicted[j];
  }
  return v;
}

std::vector<SpeedupVerdict> speedup_verdicts(const std::vector<Measurement>& ms, const std::vector<double>& predicted_us) {
  // A scenario's makespan rows, by what names the scenario; the baseline's index in each.
  using Key = std::tuple<std::string, std::int64_t, Dtype>;
  const auto key = [](const Measurement& m) { return Key{m.scenario->name, m.scenario->gpus, m.scenario->dtype}; };
  const auto makespan = [](const Measurement& m) { return m.kind == MeasurementKind::scenario && m.op.empty(); };
  std::map<Key, std::size_t> baseline;
  for (std::size_t i = 0; i < ms.size(); ++i)
    if (makespan(ms[i]) && ms[i].scenario->variants.front() == "baseline") baseline.try_emplace(key(ms[i]), i);
  std::vector<SpeedupVerdict> out;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (!makespan(ms[i]) || ms[i].scenario->variants.front() == "baseline") continue;
    const auto b = baseline.find(key(ms[i]));
    if (b == baseline.end()) continue;
    out.push_back({ms[i].scenario->name, ms[i].scenario->variants.front(), ms[b->second].time_us / ms[i].time_us,
                   predicted_us[b->second] / predicted_us[i]});
  }
  return out;
}

std::map<std::pair<std::string, std::string>, ClassError> errors_by_file(const Validation& v, const std::vector<double>& predicted_us) {
  std::map<std::pair<std::string, std::string>, ClassError> out;
  for (std::size_t i = 0; i < v.measurements.size(); ++i) {
    out[{v.files.at(i), std::string(measurement_class(v.measurements[i].kind))}].add(std::fabs(error_of(predicted_us[i], v.measurements[i])));
  }
  return out;
}

std::string format_validation(const Validation& v) {
  const bool cv = !v.held_out_us.empty();
  std::string out = fmt::format("{:<52} {:<11} {:>11} {:>11} {:>8}{}\n", "measurement", "class", "measured_us", "predicted", "error",
                                cv ? fmt::format(" {:>11} {:>8}", "held_out", "error") : "");
  for (std::size_t i = 0; i < v.measurements.size(); ++i) {
    const Measurement& m = v.measurements[i];
    std::string name = m.name.size() > 52 ? m.name.substr(0, 49) + "..." : m.name;
    out += fmt::format("{:<52} {:<11} {:>11.2f} {:>11.2f} {:>8}", name, measurement_class(m.kind), m.time_us, v.predicted_us[i],
                       percent(error_of(v.predicted_us[i], m)));
    if (cv) out += fmt::format(" {:>11.2f} {:>8}", v.held_out_us[i], percent(error_of(v.held_out_us[i], m)));
    out += "\n";
  }
  const auto as_given = errors_by_class(v.predicted_us, v.measurements);
  const auto held_out = cv ? errors_by_class(v.held_out_us, v.measurements) : std::map<std::string, ClassError>{};
  out += fmt::format("\n{:<14} {:>4}  {:>22}{}\n", "op class", "n", "mean|err| as given",
                     cv ? fmt::format("  {:>22}", "leave-one-source-out") : "");
  const auto line = [&](const std::string& c) {
    const auto& a = as_given.at(c);
    out += fmt::format("{:<14} {:>4}  {:>7.1f}% (max {:>5.0f}%)", c, a.n, 100 * a.mean(), 100 * a.worst);
    if (cv) out += fmt::format("  {:>7.1f}% (max {:>5.0f}%)", 100 * held_out.at(c).mean(), 100 * held_out.at(c).worst);
    out += "\n";
  };
  for (const auto& [c, e] : as_given)
    if (c != "all") line(c);
  line("all");
  if (cv)
    out += fmt::format("leave-one-source-out: {} sources, each predicted by a model fitted to the op-level rows of the others; "
                       "scenario rows (whole decomposed ops, layers) are never fitted\n",
                       v.sources.size());
  const auto by_file = errors_by_file(v, v.predicted_us);
  if (by_file.size() > 1) {
    const auto by_file_held_out = cv ? errors_by_file(v, v.held_out_us) : decltype(by_file){};
    out += fmt::format("\n{:<40} {:<11} {:>4}  {:>22}{}\n", "file", "class", "n", "mean|err| as given",
                       cv ? fmt::format("  {:>22}", "leave-one-source-out") : "");
    for (const auto& [key, a] : by_file) {
      const std::string name = key.first.size() > 40 ? key.first.substr(0, 37) + "..." : key.first;
      out += fmt::format("{:<40} {:<11} {:>4}  {:>7.1f}% (max {:>5.0f}%)", name, key.second, a.n, 100 * a.mean(), 100 * a.worst);
      if (cv) out += fmt::format("  {:>7.1f}% (max {:>5.0f}%)", 100 * by_file_held_out.at(key).mean(), 100 * by_file_held_out.at(key).worst);
      out += "\n";
    }
  }
  const auto verdicts = speedup_verdicts(v.measurements, v.predicted_us);
  if (verdicts.empty()) return out;
  out += fmt::format("\n{:<52} {:<14} {:>9} {:>9}  {}\n", "speedup over the baseline", "variant", "measured", "predicted", "verdict");
  int agree = 0;
  for (const SpeedupVerdict& x : verdicts) {
    const std::string name = x.scenario.size() > 52 ? x.scenario.substr(0, 49) + "..." : x.scenario;
    out += fmt::format("{:<52} {:<14} {:>8.2f}x {:>8.2f}x  {}\n", name, x.variant, x.measured, x.predicted,
                       x.agrees() ? "agrees" : x.predicted > 1 ? "WRONG: predicted a win" : "WRONG: predicted a loss");
    agree += x.agrees();
  }
  out += fmt::format("verdicts: {} of {} agree (whether the variant beats the baseline)\n", agree, verdicts.size());
  return out;
}

Json validation_json(const Validation& v) {
  Json rows = Json::array();
  for (std::size_t i = 0; i < v.measurements.size(); ++i) {
    const Measurement& m = v.measurements[i];
    Json row{{"name", m.name}, {"class", std::string(measurement_class(m.kind))}, {"file", v.files.at(i)}, {"source", m.source},
             {"measured_us", m.time_us}, {"predicted_us", to_ns(v.predicted_us[i])}};
    if (!v.held_out_us.empty()) row["held_out_us"] = to_ns(v.held_out_us[i]);
    row["clock"] = timed_in_burst(m) ? "burst" : "sustained";  // as timed; the model runs it so where it gives power.burst_speed
    rows.push_back(row);
  }
  Json speedups = Json::array();
  for (const SpeedupVerdict& x : speedup_verdicts(v.measurements, v.predicted_us))
    speedups.push_back({{"scenario", x.scenario}, {"variant", x.variant}, {"measured_speedup", std::round(x.measured * 1e4) / 1e4},
                        {"predicted_speedup", std::round(x.predicted * 1e4) / 1e4}, {"agrees", x.agrees()}});
  return Json{{"rows", rows}, {"held_out_sources", v.sources}, {"speedups", speedups}};
}

}  // namespace tpsim

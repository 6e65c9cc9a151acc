#include "tpsim/calibration/calibrate.hpp"

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/calibration/validate.hpp"
#include "tpsim/io/hardware_loader.hpp"

namespace tpsim {

namespace {

std::vector<Measurement> load_all(const std::vector<std::string>& files) {
  std::vector<Measurement> out;
  for (const std::string& f : files) {
    auto ms = load_measurements_file(f);
    out.insert(out.end(), ms.begin(), ms.end());
  }
  return out;
}

}  // namespace

Calibration calibrate(const CalibrationRequest& req) {
  if (req.measurement_files.empty()) throw InputError("--measurements: give at least one file");
  Calibration c;
  c.validation = load_all(req.validation_files);
  // Makespans of decomposed ops, fused kernels and layers are never fitted: they are
  // predicted with the held-out rows instead.
  for (Measurement& m : load_all(req.measurement_files)) {
    if (fittable(m)) c.measurements.push_back(std::move(m));
    else c.validation.push_back(std::move(m)), ++c.not_fitted;
  }
  if (c.measurements.empty()) throw InputError("--measurements: nothing op-level to fit (makespans of decomposed ops, fused kernels and layers are validation only)");
  const std::string file = hardware_file_path(req.hardware, "--hardware", "");
  c.hardware = resolve_hardware_json(file);
  const std::string description = c.hardware.value("description", "");
  const HardwareSpec start = parse_hardware(c.hardware, file);  // a bad starting file is reported as such, not as a fit failure
  check_hardware_serves(c.measurements, start);
  check_hardware_serves(c.validation, start);
  for (const auto* list : {&c.measurements, &c.validation}) {
    if (auto note = burst_clock_note(*list, start)) c.notes.push_back(*note);
    if (auto note = l2_start_note(*list, start)) c.notes.push_back(*note);
  }
  std::set<std::string> others;
  for (const auto* list : {&c.measurements, &c.validation})
    for (const Measurement& m : *list)
      if (!m.hardware.empty() && m.hardware != start.name) others.insert(m.hardware);
  for (const std::string& h : others)
    c.notes.push_back(fmt::format("some measurements say they were taken on {}, not {}: fitting {} to them", h, start.name, start.name));
  c.validation_before_us = predict_all_us(c.validation, start);
  c.hardware.erase("base");
  const auto parameters =
      load_calibration_parameters(req.parameters_file.empty() ? default_calibration_parameters_file() : req.parameters_file);
  c.report = fit_hardware(c.hardware, c.measurements, parameters, req.fit);
  c.validation_after_us = predict_all_us(c.validation, parse_hardware(c.hardware, file));

  std::vector<std::string> names;
  for (const auto& f : req.measurement_files) names.push_back(std::filesystem::path(f).filename().string());
  const std::string from = fmt::format("{} measurements ({})", c.measurements.size(), fmt::join(names, ", "));
  for (const ParameterChange& p : c.report.parameters) {
    if (!p.fitted || c.report.kept_start) continue;
    std::vector<std::string> places = p.parameter.also;
    places.push_back(p.parameter.pointer);
    for (const auto& q : places) {
      const Json::json_pointer source(q + "/source");
      if (!c.hardware.contains(source)) continue;
      const std::string before = c.hardware[source].is_string() ? c.hardware[source].get<std::string>() : "";
      c.hardware[source] = fmt::format("calibrated by tpsim calibrate from {}; was {} ({})", from, p.before, before);
    }
  }
  c.hardware["name"] = req.name;
  c.hardware["description"] = fmt::format("Calibrated from {}, starting from {}. {}", from, req.hardware,
                                          description);
  return c;
}

}  // namespace tpsim

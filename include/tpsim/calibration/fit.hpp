#pragma once
// Fitting a hardware file to measurements: the physical parameters named in
// models/calibration/parameters.json are moved within their plausible ranges by
// NLopt's BOBYQA (derivative-free, bounded) to minimise the weighted mean of
// squared log errors between simulated and measured times. Parameters that no
// measurement moves are left as they are and reported so.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tpsim/calibration/measurement.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim {

struct CalibrationParameter {
  std::string pointer;  // JSON pointer to a {"value", "unit", "source"} quantity
  std::vector<std::string> also;  // quantities tied to it (one physical parameter, several places)
  std::string unit;
  double min = 0, max = 0;
  std::string meaning;
};

std::vector<CalibrationParameter> load_calibration_parameters(const std::string& file);
std::string default_calibration_parameters_file();  // models/calibration/parameters.json

struct FitOptions {
  int max_evaluations = 400;
  std::vector<std::string> only;  // when not empty: fit only parameters whose pointer contains one of these
};

struct ParameterChange {
  CalibrationParameter parameter;
  double before = 0, after = 0;
  bool fitted = false;  // false: absent from the file or no measurement depends on it
  std::string why_not;
  // "lower" or "upper" when the fit ended at an end of the plausible range (the data
  // ask for a value outside it: a mechanism missing from the model, or a bad measurement).
  std::string bound() const;
};

struct Tradeoff {  // two fitted parameters the measurements cannot tell apart
  std::string a, b;  // their pointers
  double correlation = 0;
};

struct FitReport {
  std::vector<ParameterChange> parameters;
  std::vector<Tradeoff> tradeoffs;  // |correlation| >= 0.9 at the fitted point, most confounded first
  std::vector<double> predicted_before_us, predicted_after_us;  // per measurement
  double objective_before = 0, objective_after = 0;
  int evaluations = 0;
  bool kept_start = false;  // no candidate fitted better than the starting model, which is kept
};

// Fits `hardware` (a resolved hardware JSON: no "base") in place.
FitReport fit_hardware(Json& hardware, const std::vector<Measurement>& measurements,
                       const std::vector<CalibrationParameter>& parameters, const FitOptions& options);

// Per op class: count, mean and max |error| of two sets of predictions, then all classes together.
std::string format_error_table(const std::vector<double>& before_us, const std::vector<double>& after_us,
                               const std::vector<Measurement>& measurements);
// The error table, the objective, then every parameter moved.
std::string format_fit_report(const FitReport& report, const std::vector<Measurement>& measurements);
// One row per measurement: name, class, measured, predicted before and after.
Json prediction_rows_json(const std::vector<double>& before_us, const std::vector<double>& after_us,
                          const std::vector<Measurement>& measurements);
Json fit_report_json(const FitReport& report, const std::vector<Measurement>& measurements);

// |predicted / measured - 1| per op class, and over every row as "all".
struct ClassError {
  int n = 0;
  double sum = 0, worst = 0;
  double mean() const { return n ? sum / n : 0; }
  void add(double abs_error) { ++n, sum += abs_error, worst = std::max(worst, abs_error); }
};
std::map<std::string, ClassError> errors_by_class(const std::vector<double>& predicted_us, const std::vector<Measurement>& measurements);

// Mean |predicted / measured - 1| over the measurements of one class ("" = all).
double mean_abs_error(const std::vector<double>& predicted_us, const std::vector<Measurement>& measurements,
                      const std::string& op_class = "");

}  // namespace tpsim

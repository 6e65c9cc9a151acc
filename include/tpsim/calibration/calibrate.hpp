#pragma once
// `tpsim calibrate`: measurements in, a hardware file that `run` and `sweep` accept out.
#include <string>
#include <vector>

#include "tpsim/calibration/fit.hpp"

namespace tpsim {

struct CalibrationRequest {
  std::vector<std::string> measurement_files;
  std::vector<std::string> validation_files;  // held out of the fit: predicted before and after, to see it generalise
  std::string hardware;         // shipped model name or path to a hardware JSON
  std::string name;             // the new model's name
  std::string parameters_file;  // default: models/calibration/parameters.json
  FitOptions fit;
};

struct Calibration {
  std::vector<Measurement> measurements;
  FitReport report;
  std::vector<Measurement> validation;                          // from validation_files, then what may not be fitted
  int not_fitted = 0;  // makespans of decomposed ops, fused kernels or layers, copies timed beside GEMMs: moved to `validation`
  std::vector<double> validation_before_us, validation_after_us;  // predicted by the starting and the calibrated model
  std::vector<std::string> notes;  // worth a line to the user (measurements from other hardware)
  Json hardware;  // the calibrated file: base merged in, fitted values and their sources replaced
};

Calibration calibrate(const CalibrationRequest& request);

}  // namespace tpsim

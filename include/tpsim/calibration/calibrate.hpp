#pragma once
// `tpsim calibrate`: measurements in, a hardware file that `run` and `sweep` accept out.
#include <string>
#include <vector>

#include "tpsim/calibration/fit.hpp"

namespace tpsim {

struct CalibrationRequest {
  std::vector<std::string> measurement_files;
  std::string hardware;         // shipped model name or path to a hardware JSON
  std::string name;             // the new model's name
  std::string parameters_file;  // default: models/calibration/parameters.json
  FitOptions fit;
};

struct Calibration {
  std::vector<Measurement> measurements;
  FitReport report;
  Json hardware;  // the calibrated file: base merged in, fitted values and their sources replaced
};

Calibration calibrate(const CalibrationRequest& request);

}  // namespace tpsim

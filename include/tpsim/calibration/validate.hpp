#pragma once
// `tpsim validate`: how far the model is from measurements it was, or was not,
// fitted to. Whole decomposed ops, layers and steps (scenario rows) are only ever
// predicted; with cross-validation every source is held out in turn: the op-level
// rows of every other source are fitted, and the held-out source's rows predicted.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tpsim/calibration/fit.hpp"

namespace tpsim {

struct ValidationRequest {
  std::vector<std::string> files;
  std::string hardware;         // shipped model name or path
  std::string parameters_file;  // default: models/calibration/parameters.json
  bool cross_validate = false;
  FitOptions fit;               // for each cross-validation fit
};

struct Validation {
  std::vector<Measurement> measurements;
  std::vector<std::string> files;    // per measurement: the file it came from (its name, without the directory)
  std::vector<double> predicted_us;  // by the model as given
  std::vector<double> held_out_us;   // cross-validated (empty without it)
  std::vector<std::string> sources;  // the sources held out in turn
  std::vector<std::string> notes;    // worth a line to the user (burst-timed rows the model cannot speed up)
};

Validation validate(const ValidationRequest& request);

// Whether a measurement may be fitted: op-level physics (an op, or an op's time inside a
// scenario, or a baseline's one collective and one GEMM), not the makespan of a
// decomposed op, a fused kernel, a layer or a step: those are validation only.
bool fittable(const Measurement& m);

// Whether a variant beats the baseline: for every scenario makespan row whose scenario (its
// name, GPUs and dtype) also has a baseline row, the measured and the predicted speedup,
// baseline / variant. The verdict agrees when both are above 1 or both are not: the question
// a user asks of tpsim ("does async TP pay here?"), which a small error can still get wrong.
struct SpeedupVerdict {
  std::string scenario, variant;
  double measured = 0, predicted = 0;
  bool agrees() const { return (measured > 1) == (predicted > 1); }
};
std::vector<SpeedupVerdict> speedup_verdicts(const std::vector<Measurement>& ms, const std::vector<double>& predicted_us);

// Mean and max |error| per file and op class (the file's name, then the class): where a
// model's error comes from when several sources are checked at once.
std::map<std::pair<std::string, std::string>, ClassError> errors_by_file(const Validation& v, const std::vector<double>& predicted_us);

// One row per measurement, then mean and max |error| per op class and per file and class,
// then the speedup verdicts.
std::string format_validation(const Validation& v);
Json validation_json(const Validation& v);

}  // namespace tpsim

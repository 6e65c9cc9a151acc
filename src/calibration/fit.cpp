#include "tpsim/calibration/fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <fmt/format.h>
#include <nlopt.hpp>

#include "tpsim/calibration/identifiability.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim {

namespace {

// Weight of the pull toward the start, per unit of normalised range squared: small next
// to any misfit a measurement can show (1% error is 1e-4 of squared log error).
constexpr double kPrior = 1e-5;

// The fit works in [0, 1] per parameter so BOBYQA's trust region means the same for all.
struct Problem {
  Json* hardware;
  const std::vector<Measurement>* measurements;
  std::vector<const CalibrationParameter*> free;
  std::vector<std::vector<std::string>> value_pointers;  // per free parameter: its quantity and those tied to it
  int evaluations = 0;
  double best = std::numeric_limits<double>::infinity();
  std::vector<double> best_x;
  std::string refused;
  std::vector<double> x0;

  double value_of(std::size_t i, double x) const { return free[i]->min + x * (free[i]->max - free[i]->min); }

  void apply(const std::vector<double>& x) {
    for (std::size_t i = 0; i < free.size(); ++i) set(value_pointers[i], value_of(i, x[i]));
  }

  void set(const std::vector<std::string>& pointers, double v) {
    for (const auto& vp : pointers) (*hardware)[Json::json_pointer(vp)] = v;
  }

  std::vector<double> predict() const {
    const HardwareSpec hw = parse_hardware(*hardware, "calibration candidate");
    return predict_all_us(*measurements, hw);
  }
};

// Each measurement's log error scaled by the square root of its share of the weight:
// their squares sum to the objective, and they are the residuals of the fit.
std::vector<double> weighted_log_errors(const std::vector<double>& predicted, const std::vector<Measurement>& ms) {
  double weights = 0;
  for (const auto& m : ms) weights += m.weight;
  std::vector<double> r(ms.size(), 0.0);
  if (weights <= 0) return r;
  for (std::size_t i = 0; i < ms.size(); ++i)
    r[i] = std::sqrt(ms[i].weight / weights) * std::log(std::max(predicted[i], 1e-9) / ms[i].time_us);
  return r;
}

double objective_of(const std::vector<double>& predicted, const std::vector<Measurement>& ms) {
  double sum = 0;
  for (double r : weighted_log_errors(predicted, ms)) sum += r * r;
  return sum;
}

double nlopt_objective(const std::vector<double>& x, std::vector<double>&, void* data) {
  auto* p = static_cast<Problem*>(data);
  p->apply(x);
  double f = 0;
  try {
    f = objective_of(p->predict(), *p->measurements);
    // A weak pull toward the starting values: directions the measurements cannot tell
    // apart (more parameters than measurements) stay where they were instead of drifting.
    for (std::size_t i = 0; i < x.size(); ++i) f += kPrior * (x[i] - p->x0[i]) * (x[i] - p->x0[i]);
  } catch (const InputError& e) {
    p->refused = e.what();  // a value inside the ranges that the hardware loader refuses
    throw nlopt::forced_stop();
  }
  ++p->evaluations;
  if (f < p->best) p->best = f, p->best_x = x;
  return f;
}

double round_significant(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

// A JSON pointer to a quantity (checked here, so using it later cannot throw).
std::string json_pointer_at(const std::string& text, const std::string& path) {
  if (!text.starts_with("/")) fail_at(path, "must be a JSON pointer (starting with /)");
  try {
    (void)Json::json_pointer(text + "/value");
  } catch (const Json::exception& e) {
    fail_at(path, fmt::format("is not a JSON pointer: {}", e.what()));
  }
  return text;
}

// Pairs of fitted parameters whose estimates are correlated beyond 0.9 at `x`: the
// residuals are the objective's (weighted log errors), the prior its own.
std::vector<Tradeoff> tradeoffs_at(Problem& problem, const std::vector<double>& x) {
  const Residuals residuals = [&](const std::vector<double>& at) {
    problem.apply(at);
    return weighted_log_errors(problem.predict(), *problem.measurements);
  };
  std::vector<Tradeoff> out;
  for (const ConfoundedPair& p : confounded_pairs(residuals, x, kPrior))
    out.push_back({problem.free[p.a]->pointer, problem.free[p.b]->pointer, p.correlation});
  problem.apply(x);
  return out;
}

// Tradeoffs joined into groups of parameters (a trades with b, b with c: one group, the
// connected components of the tradeoff graph), each with its strongest |correlation|, in the
// order their parameters were first named.
std::vector<std::pair<std::vector<std::string>, double>> tradeoff_groups(const std::vector<Tradeoff>& tradeoffs) {
  std::vector<std::string> names;
  const auto vertex = [&](const std::string& p) {
    const auto it = std::find(names.begin(), names.end(), p);
    if (it != names.end()) return static_cast<std::size_t>(it - names.begin());
    names.push_back(p);
    return names.size() - 1;
  };
  boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS> graph;
  for (const Tradeoff& t : tradeoffs) {
    const std::size_t u = vertex(t.a), v = vertex(t.b);
    boost::add_edge(u, v, graph);
  }
  std::vector<int> component(names.size());
  const int count = names.empty() ? 0 : boost::connected_components(graph, component.data());
  std::vector<std::pair<std::vector<std::string>, double>> groups(static_cast<std::size_t>(count));
  for (std::size_t v = 0; v < names.size(); ++v) groups[static_cast<std::size_t>(component[v])].first.push_back(names[v]);
  for (const Tradeoff& t : tradeoffs) {
    double& strongest = groups[static_cast<std::size_t>(component[vertex(t.a)])].second;
    strongest = std::max(strongest, std::fabs(t.correlation));
  }
  return groups;
}

bool selected(const CalibrationParameter& p, const FitOptions& o) {
  if (o.only.empty()) return true;
  for (const auto& s : o.only)
    if (p.pointer.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

std::string default_calibration_parameters_file() { return models_dir() + "/calibration/parameters.json"; }

std::vector<CalibrationParameter> load_calibration_parameters(const std::string& file) {
  const Json j = read_json_file(file);
  try {
    const ObjectReader root(j, "$", {"description", "parameters"});
    const Json& list = root.array("parameters");
    std::vector<CalibrationParameter> out;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const ObjectReader r(list[i], fmt::format("$.parameters[{}]", i), {"pointer", "also", "unit", "min", "max", "meaning"});
      CalibrationParameter p;
      p.pointer = json_pointer_at(r.string("pointer"), r.child_path("pointer"));
      if (r.has("also")) {
        const Json& also = r.array("also");
        for (std::size_t k = 0; k < also.size(); ++k) {
          const std::string path = fmt::format("{}[{}]", r.child_path("also"), k);
          p.also.push_back(json_pointer_at(as_string(also[k], path), path));
        }
      }
      p.unit = r.string("unit");
      const Json& lo = r.at("min");
      if (!lo.is_number() || lo.get<double>() < 0) fail_at(r.child_path("min"), "must be a number >= 0");
      p.min = lo.get<double>();
      p.max = r.positive_number("max");
      if (p.max <= p.min) fail_at(r.child_path("max"), "must be above min");
      p.meaning = r.optional_string("meaning").value_or("");
      out.push_back(p);
    }
    return out;
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", file, e.what()));
  }
}

FitReport fit_hardware(Json& hardware, const std::vector<Measurement>& measurements,
                       const std::vector<CalibrationParameter>& parameters, const FitOptions& options) {
  if (measurements.empty()) throw InputError("calibration needs at least one measurement");
  // A pattern that selects nothing is a typo, not a request to fit nothing.
  for (const std::string& pattern : options.only)
    if (std::none_of(parameters.begin(), parameters.end(),
                     [&](const CalibrationParameter& p) { return p.pointer.find(pattern) != std::string::npos; })) {
      std::vector<std::string> pointers;
      for (const CalibrationParameter& p : parameters) pointers.push_back(p.pointer);
      std::string msg = fmt::format("--params: \"{}\" is in no fittable parameter's pointer", pattern);
      if (auto s = closest_match(pattern, pointers)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
      throw InputError(msg);
    }
  Problem problem{&hardware, &measurements, {}, {}, 0, std::numeric_limits<double>::infinity(), {}, {}, {}};
  const Json start = hardware;  // always a candidate: the output never fits worse than the input
  FitReport report;
  report.predicted_before_us = problem.predict();
  report.objective_before = objective_of(report.predicted_before_us, measurements);
  std::vector<double> x0;
  for (const CalibrationParameter& p : parameters) {
    ParameterChange change{p, 0, 0, false, ""};
    const Json::json_pointer quantity(p.pointer);
    if (!selected(p, options)) {
      change.why_not = "not selected";
    } else if (!hardware.contains(quantity) || !hardware[quantity].is_object() || !hardware[quantity].contains("value")) {
      change.why_not = "not in this hardware file";
    } else if (hardware[quantity].value("unit", "") != p.unit) {
      throw InputError(fmt::format("{}: unit is \"{}\" but calibration ranges are in \"{}\"", p.pointer,
                                   hardware[quantity].value("unit", ""), p.unit));
    } else {
      std::vector<std::string> vp = {p.pointer + "/value"};
      for (const auto& tied : p.also)
        if (hardware.contains(Json::json_pointer(tied + "/value"))) vp.push_back(tied + "/value");
      change.before = change.after = hardware[Json::json_pointer(vp.front())].get<double>();
      // Moved by a quarter of its range, does any prediction change?
      // A quarter of its range up and down: does any prediction change? (Both ways: when two
      // tile shapes are equally good, lowering one only moves the heuristic to the other.)
      bool matters = false;
      for (double step : {0.25, -0.25}) {
        const double probe = std::clamp(change.before + step * (p.max - p.min), p.min, p.max);
        if (probe == change.before) continue;
        problem.set(vp, probe);
        matters = matters || problem.predict() != report.predicted_before_us;
      }
      problem.set(vp, change.before);
      if (!matters) {
        change.why_not = "no measurement depends on it";
      } else {
        change.fitted = true;
        problem.free.push_back(&p);
        problem.value_pointers.push_back(vp);
        x0.push_back(std::clamp((change.before - p.min) / (p.max - p.min), 0.0, 1.0));
      }
    }
    report.parameters.push_back(change);
  }
  if (!problem.free.empty()) {
    const unsigned n = static_cast<unsigned>(problem.free.size());
    nlopt::opt opt(n >= 2 ? nlopt::LN_BOBYQA : nlopt::LN_COBYLA, n);
    opt.set_lower_bounds(std::vector<double>(n, 0.0));
    opt.set_upper_bounds(std::vector<double>(n, 1.0));
    opt.set_min_objective(nlopt_objective, &problem);
    opt.set_maxeval(options.max_evaluations);
    opt.set_xtol_abs(1e-4);
    opt.set_initial_step(0.1);
    problem.x0 = x0;
    std::vector<double> x = x0;
    double f = 0;
    try {
      opt.optimize(x, f);
    } catch (const std::runtime_error&) {
      // roundoff or forced stop: the best point seen is still the answer
    }
    if (!problem.refused.empty())
      throw InputError(fmt::format("calibration parameter ranges allow a value the hardware file refuses: {}", problem.refused));
    if (problem.best_x.empty()) problem.best_x = x0;
    report.tradeoffs = tradeoffs_at(problem, problem.best_x);
    std::size_t i = 0;
    for (ParameterChange& c : report.parameters) {
      if (!c.fitted) continue;
      const double v = round_significant(problem.value_of(i, problem.best_x[i]), 4);
      problem.set(problem.value_pointers[i], v);
      c.after = v;
      ++i;
    }
  }
  report.evaluations = problem.evaluations;
  report.predicted_after_us = problem.predict();
  report.objective_after = objective_of(report.predicted_after_us, measurements);
  // Few evaluations, tied values that started apart, 4-digit rounding: the search can end
  // worse than where it began. Then the start is the answer.
  if (report.objective_after > report.objective_before) {
    hardware = start;
    for (ParameterChange& c : report.parameters) c.after = c.before;
    report.predicted_after_us = report.predicted_before_us;
    report.objective_after = report.objective_before;
    report.kept_start = true;
  }
  return report;
}

std::string ParameterChange::bound() const {
  if (!fitted) return "";
  const double tolerance = 1e-3 * (parameter.max - parameter.min);  // values are rounded to 4 digits
  if (after <= parameter.min + tolerance) return "lower";
  if (after >= parameter.max - tolerance) return "upper";
  return "";
}

std::map<std::string, ClassError> errors_by_class(const std::vector<double>& predicted_us, const std::vector<Measurement>& ms) {
  std::map<std::string, ClassError> out;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const double e = std::fabs(predicted_us[i] / ms[i].time_us - 1);
    for (const std::string& c : {std::string(measurement_class(ms[i].kind)), std::string("all")}) out[c].add(e);
  }
  return out;
}

double mean_abs_error(const std::vector<double>& predicted_us, const std::vector<Measurement>& ms, const std::string& op_class) {
  const auto errors = errors_by_class(predicted_us, ms);
  const auto it = errors.find(op_class.empty() ? "all" : op_class);
  return it == errors.end() ? 0 : it->second.mean();
}

std::string format_error_table(const std::vector<double>& before, const std::vector<double>& after, const std::vector<Measurement>& ms) {
  const auto b = errors_by_class(before, ms), a = errors_by_class(after, ms);
  std::string out = fmt::format("{:<14} {:>4}  {:>16}  {:>16}\n", "op class", "n", "mean|err| before", "mean|err| after");
  for (const auto& [c, e] : b)
    if (c != "all")
      out += fmt::format("{:<14} {:>4}  {:>7.1f}% (max {:>4.0f}%)  {:>7.1f}% (max {:>4.0f}%)\n", c, e.n, 100 * e.mean(), 100 * e.worst,
                         100 * a.at(c).mean(), 100 * a.at(c).worst);
  out += fmt::format("{:<14} {:>4}  {:>7.1f}%             {:>7.1f}%\n", "all", ms.size(), 100 * mean_abs_error(before, ms),
                     100 * mean_abs_error(after, ms));
  return out;
}

Json prediction_rows_json(const std::vector<double>& before, const std::vector<double>& after, const std::vector<Measurement>& ms) {
  Json rows = Json::array();
  for (std::size_t i = 0; i < ms.size(); ++i)
    rows.push_back({{"name", ms[i].name},
                    {"class", std::string(measurement_class(ms[i].kind))},
                    {"measured_us", ms[i].time_us},
                    {"predicted_before_us", before[i]},
                    {"predicted_after_us", after[i]}});
  return rows;
}

std::string format_fit_report(const FitReport& r, const std::vector<Measurement>& ms) {
  std::string out = format_error_table(r.predicted_before_us, r.predicted_after_us, ms);
  out += fmt::format("objective (mean squared log error) {:.5f} -> {:.5f} in {} simulations of the measurement set\n",
                     r.objective_before, r.objective_after, r.evaluations);
  if (r.kept_start) out += "no candidate fitted better than the starting model: it is kept unchanged (try more --max-evals)\n";
  const auto fitted = std::count_if(r.parameters.begin(), r.parameters.end(), [](const ParameterChange& c) { return c.fitted; });
  if (static_cast<std::size_t>(fitted) > ms.size())
    out += fmt::format("note: {} parameters from {} measurements is underdetermined; measure more (tpsim microbench) or fit fewer (--params)\n",
                       fitted, ms.size());
  int at_bound = 0;
  for (const ParameterChange& c : r.parameters) {
    const std::string bound = c.bound();
    at_bound += !bound.empty();
    if (c.fitted)
      out += fmt::format("  {:<46} {:>9.4g} -> {:<9.4g} {}{}\n", c.parameter.pointer, c.before, c.after, c.parameter.unit,
                         bound.empty() ? "" : fmt::format("  (at the {} end of its range)", bound));
    else if (c.why_not != "not selected") out += fmt::format("  {:<46} kept ({})\n", c.parameter.pointer, c.why_not);
  }
  for (const auto& [members, strongest] : tradeoff_groups(r.tradeoffs))
    out += fmt::format("note: {} trade off against each other (|correlation| up to {:.2f}): the measurements see mostly their "
                       "combination, so each value alone is uncertain; measure shapes that move one without the others\n",
                       fmt::join(members, ", "), strongest);
  if (at_bound > 0)
    out += fmt::format("note: {} parameter(s) ended at an end of their plausible range: the "
                       "measurements ask for values no such GPU has. Check that --hardware describes the GPU measured and that "
                       "the measurements are what they say; a mechanism the model lacks shows up the same way.\n", at_bound);
  return out;
}

Json fit_report_json(const FitReport& r, const std::vector<Measurement>& ms) {
  const Json rows = prediction_rows_json(r.predicted_before_us, r.predicted_after_us, ms);
  Json params = Json::array();
  for (const ParameterChange& c : r.parameters) {
    Json p{{"pointer", c.parameter.pointer}, {"unit", c.parameter.unit}, {"fitted", c.fitted}};
    if (c.fitted) p["before"] = c.before, p["after"] = c.after;
    if (!c.bound().empty()) p["at_bound"] = c.bound();
    else p["why_not"] = c.why_not;
    params.push_back(p);
  }
  Json tradeoffs = Json::array();
  for (const Tradeoff& t : r.tradeoffs) tradeoffs.push_back({{"a", t.a}, {"b", t.b}, {"correlation", t.correlation}});
  return Json{{"objective_before", r.objective_before}, {"objective_after", r.objective_after}, {"kept_start", r.kept_start}, {"tradeoffs", tradeoffs},
              {"evaluations", r.evaluations}, {"parameters", params}, {"measurements", rows}};
}

}  // namespace tpsim

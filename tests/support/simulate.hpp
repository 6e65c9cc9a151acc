#pragma once
// Test helpers: the shipped H100 model, scenarios from inline JSON, op lookup.
#include <string>

#include "tpsim/app/run_scenario.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/input_error.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/runtime/executor.hpp"

namespace tpsim::test {

inline const HardwareSpec& h100() {
  static const HardwareSpec hw = load_hardware_file(models_dir() + "/h100_sxm.json");
  return hw;
}

// The one-line error a scenario is refused with; "" when it parses.
inline std::string scenario_error(const std::string& scenario_json) {
  try {
    parse_scenario(Json::parse(scenario_json), "");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

inline RunResult simulate(const std::string& scenario_json) {
  return run_scenario(parse_scenario(Json::parse(scenario_json), ""));
}

inline const VariantRun& variant(const RunResult& r, const std::string& name) {
  for (const auto& run : r.runs)
    if (run.variant == name) return run;
  throw std::logic_error("variant not run: " + name);
}

inline double makespan_us(const RunResult& r, const std::string& name) { return to_us(variant(r, name).metrics.makespan); }

// Device time of one op (first block to last), in microseconds.
inline double op_us(const Timeline& tl, OpId id) { return to_us(tl.ops[id].end - tl.ops[id].start); }

// One kernel alone on one GPU: its device time in microseconds.
inline double kernel_alone_us(OpPayload payload, const HardwareSpec& hw = h100()) {
  Dag dag(1);
  const OpId id = dag.add(0, 0, "kernel", std::move(payload));
  return op_us(execute(dag, hw), id);
}

// One GEMM alone on one GPU: its kernel time in microseconds.
inline double gemm_alone_us(std::int64_t m, std::int64_t n, std::int64_t k, Dtype d, const HardwareSpec& hw = h100(),
                            std::int64_t batch = 1) {
  return kernel_alone_us(GemmOp{{m, n, k, d, batch}}, hw);
}

}  // namespace tpsim::test

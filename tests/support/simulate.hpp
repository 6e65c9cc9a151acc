#pragma once
// Test helpers: the shipped H100 model, scenarios from inline JSON, op lookup.
#include <string>

#include <fmt/format.h>

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

// Llama 3 70B's transformer layer under TP 8 on the shipped H100, bf16, 16,384 tokens in
// sequences of 8,192, baseline and async TP, for `pass`.
inline Scenario llama3_70b_tp8_layer(const std::string& pass) {
  return parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "model": "llama3_70b", "tokens": 16384, "seq_len": 8192, "pass": "{}"}},
      "variants": ["baseline", "async_tp"]}})",
                                                pass)),
                        "");
}

// The op of that name in a rank's program, or nullptr.
inline const Op* find_op(const Dag& dag, const std::string& name, int rank = 0) {
  for (OpId id : dag.program(rank))
    if (dag.op(id).name == name) return &dag.op(id);
  return nullptr;
}

// Where the op named `name` stands in a rank's program (-1 when absent): which of two runs first.
inline int program_position(const Dag& dag, const std::string& name, int rank = 0) {
  int i = 0;
  for (OpId id : dag.program(rank)) {
    if (dag.op(id).name == name) return i;
    ++i;
  }
  return -1;
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

// What a column-parallel linear's weight gradient reads under sequence parallelism: its
// input gathered again (Megatron-LM) or the gathered input autograd kept (PyTorch TP).
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/step/memory_ledger.hpp"
#include "tpsim/strategies/registry.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::string layer(const std::string& extra, const std::string& pass = "backward") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "model": "llama3_70b", "tokens": 16384, "seq_len": 8192, "pass": "{}"{}}},
      "variants": ["baseline", "async_tp"]}})",
                     pass, extra);
}

int all_gathers(const Dag& dag) {
  int n = 0;
  for (OpId id : dag.program(0)) n += dag.op(id).name.ends_with(".all_gather");
  return n;
}

}  // namespace

TEST_CASE("Kept gathered inputs spare backward two all-gathers a layer", "[strategies][tp]") {
  const Scenario regather = parse_scenario(Json::parse(layer("")), ""), saved = parse_scenario(Json::parse(layer(R"(, "tp_weight_grad_input": "saved")")), "");
  CHECK_FALSE(regather.workload.tp_saves_gathered_input);
  CHECK(saved.workload.tp_saves_gathered_input);
  // Backward gathers: the output gradients of w2 and the out projection, and (Megatron) the
  // inputs of w1/w3 and QKV again.
  CHECK(all_gathers(build_layer_dag(regather, "baseline")) == 4);
  CHECK(all_gathers(build_layer_dag(saved, "baseline")) == 2);
  // The same weight-gradient GEMMs run either way.
  const RunResult a = run_scenario(regather), b = run_scenario(saved);
  CHECK(makespan_us(b, "baseline") < makespan_us(a, "baseline"));
  CHECK(makespan_us(b, "async_tp") <= makespan_us(a, "async_tp"));
  // Forward does not change.
  const RunResult fa = simulate(layer("", "forward")), fb = simulate(layer(R"(, "tp_weight_grad_input": "saved")", "forward"));
  CHECK(makespan_us(fa, "baseline") == makespan_us(fb, "baseline"));
  CHECK_THAT(scenario_error(layer(R"(, "tp_weight_grad_input": "kept")")), Catch::Contains("$.workload.tp_weight_grad_input"));
}

TEST_CASE("Kept gathered norm outputs cost (tp - 1) x their sharded size in activation memory", "[step][memory][tp]") {
  const auto spec = [](bool saved) {
    return parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
        "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {{"tp": 8}},
                     "tp_weight_grad_input": "{}"}}, "variants": ["baseline"]}})",
                                                  saved ? "saved" : "regather")),
                          "")
        .workload.step;
  };
  const TrainingStepSpec a = spec(false), b = spec(true);
  const double tokens = 8192, h = 4096, tp = 8, e = 2;
  // Two norm outputs per layer, each [T, H] whole on every rank instead of [T/tp, H].
  CHECK(activation_bytes_per_layer(b, Checkpointing::none, e) - activation_bytes_per_layer(a, Checkpointing::none, e) ==
        Approx(2 * tokens * h * e * (1 - 1 / tp)).epsilon(1e-12));
  // Selective (flash attention) recomputes the norms, full keeps only the layer input: no change.
  CHECK(activation_bytes_per_layer(b, Checkpointing::selective, e) == activation_bytes_per_layer(a, Checkpointing::selective, e));
  CHECK(activation_bytes_per_layer(b, Checkpointing::full, e) == activation_bytes_per_layer(a, Checkpointing::full, e));
}

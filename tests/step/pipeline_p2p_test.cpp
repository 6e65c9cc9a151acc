// Pipeline sends that the next pass waits for (Megatron-LM's default) against asynchronous ones.
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/step/step_program.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::string step(const std::string& p2p) {
  return fmt::format(R"({{"hardware": "h100_sxm_llama3_cluster", "gpus": 32, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 8,
                    "mesh": {{"tp": 8, "pp": 4}}, "microbatches": 8{}}}, "variants": ["baseline"]}})",
                     p2p);
}

StepPlan plan(const std::string& json) {
  const Scenario s = parse_scenario(Json::parse(json), "");
  return plan_step(s.workload.step, simulate_layer_costs(s, "baseline"), s.hardware, s.dtype);
}

}  // namespace

TEST_CASE("With blocking pipeline communication a stage's next pass waits for its send", "[step][pp]") {
  const auto waits_for_send = [](const StepPlan& p) {
    int n = 0;
    for (const auto& t : p.program.tasks)
      if (!t.communication)
        for (int d : t.deps) {
          const StepTask& dep = p.program.tasks[static_cast<std::size_t>(d)];
          n += dep.dim == "pp" && dep.stage == t.stage;
        }
    return n;
  };
  const StepPlan async = plan(step("")), blocking = plan(step(R"(, "pp_p2p": "blocking")"));
  CHECK(waits_for_send(async) == 0);
  // Every send but those after a stage's last pass is waited on by that stage's next pass:
  // 8 microbatches, forward sends on stages 0-2 and backward sends on stages 1-3.
  CHECK(waits_for_send(blocking) == 2 * 3 * 8);
  const auto step_ms = [](const std::string& json) {
    return to_us(run_training_step(parse_scenario(Json::parse(json), "")).runs[0].sim.makespan) / 1e3;
  };
  CHECK(step_ms(step(R"(, "pp_p2p": "blocking")")) > step_ms(step("")));
}

TEST_CASE("pp_p2p is checked, and noted as unused without a pipeline", "[step][pp][input]") {
  CHECK(scenario_error(step(R"(, "pp_p2p": "blockin")")).find("$.workload.pp_p2p: unknown value \"blockin\" (did you mean \"blocking\"?)") !=
        std::string::npos);
  const std::string no_pp = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"tp": 8}, "pp_p2p": "blocking"}})";
  const Scenario s = parse_scenario(Json::parse(no_pp), "");
  bool noted = false;
  for (const auto& n : s.notes) noted = noted || n.find("pp_p2p") != std::string::npos;
  CHECK(noted);
}

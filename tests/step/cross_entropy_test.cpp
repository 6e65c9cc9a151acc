#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

std::string step(int tp, const std::string& loss) {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2,
                    "mesh": {{"fsdp": {}, "tp": {}}}, "activation_checkpoint": "full", "cross_entropy": "{}"}},
      "variants": ["baseline"]}})",
                     8 / tp, tp, loss);
}
Scenario scenario(const std::string& json) { return parse_scenario(Json::parse(json), ""); }
double logits_bytes(const Scenario& s) {
  const StepVariantRun r = run_step_variant(s, "baseline", simulate_layer_costs(s, "baseline"));
  for (const auto& [kind, bytes] : r.memory.at(0).parts)
    if (kind == "logits and loss") return bytes;
  return -1;
}

}  // namespace

TEST_CASE("aten's cross entropy holds twice the in-place loss's bytes per logit and takes longer", "[step][loss][memory]") {
  for (int tp : {1, 8}) {
    const Scenario in_place = scenario(step(tp, "in_place")), aten = scenario(step(tp, "aten"));
    // 12 bytes per logit (three fp32 tensors) against 6 (bf16 logits and one fp32 copy), on
    // this rank's vocabulary shard.
    const double logits = 16384.0 * static_cast<double>((128256 + tp - 1) / tp);
    CHECK(logits_bytes(in_place) == Approx(6 * logits));
    CHECK(logits_bytes(aten) == Approx(12 * logits));
    const LayerCosts a = simulate_layer_costs(in_place, "baseline"), b = simulate_layer_costs(aten, "baseline");
    CHECK(b.output_forward > a.output_forward);
    CHECK(b.output_backward > a.output_backward);
    // The decoder layers do not change.
    CHECK(b.forward == a.forward);
  }
  CHECK(test::scenario_error(step(1, "fused")).find("$.workload.cross_entropy") != std::string::npos);
}

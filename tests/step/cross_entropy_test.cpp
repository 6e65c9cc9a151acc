#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

std::string step(int tp, const std::string& loss, const std::string& extra = "") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2,
                    "mesh": {{"fsdp": {}, "tp": {}}}, "activation_checkpoint": "full", "cross_entropy": "{}"{}}},
      "variants": ["baseline"]}})",
                     8 / tp, tp, loss, extra);
}
Scenario scenario(const std::string& json) { return parse_scenario(Json::parse(json), ""); }
double ledger_part(const Scenario& s, const std::string& part) {
  const StepVariantRun r = run_step_variant(s, "baseline", simulate_layer_costs(s, "baseline"));
  for (const auto& [kind, bytes] : r.memory.at(0).parts)
    if (kind == part) return bytes;
  return -1;
}
double logits_bytes(const Scenario& s) { return ledger_part(s, "logits and loss"); }

}  // namespace

TEST_CASE("aten's cross entropy holds twice the in-place loss's bytes per logit and takes longer", "[step][loss][memory]") {
  for (int tp : {1, 8}) {
    const Scenario in_place = scenario(step(tp, "in_place")), aten = scenario(step(tp, "aten"));
    // 12 bytes per logit (three fp32 tensors) against 6 (bf16 logits and one fp32 copy), on
    // this rank's vocabulary shard; with TP, loss_parallel's backward holds four fp32 tensors.
    const double logits = 16384.0 * static_cast<double>((128256 + tp - 1) / tp);
    CHECK(logits_bytes(in_place) == Approx(6 * logits));
    CHECK(logits_bytes(aten) == Approx((tp > 1 ? 16 : 12) * logits));
    const LayerCosts a = simulate_layer_costs(in_place, "baseline"), b = simulate_layer_costs(aten, "baseline");
    CHECK(b.output_forward > a.output_forward);
    CHECK(b.output_backward > a.output_backward);
    // The decoder layers do not change.
    CHECK(b.forward == a.forward);
  }
  CHECK(test::scenario_error(step(1, "fused")).find("$.workload.cross_entropy") != std::string::npos);
}

TEST_CASE("loss_parallel keeps the loss on the vocabulary shard, and without it every rank holds and computes all the logits", "[step][loss][memory]") {
  const Scenario shard = scenario(step(8, "aten")), gathered = scenario(step(8, "aten", R"(, "loss_parallel": false)"));
  const double vocab_logits = 16384.0 * 128256;
  // Gathered: aten's fused loss on the whole vocabulary, 12 bytes a logit; 8x the logits of the
  // shard the decomposed loss holds at 16 bytes a logit.
  CHECK(logits_bytes(gathered) == Approx(12 * vocab_logits));
  CHECK(logits_bytes(shard) == Approx(16 * vocab_logits / 8));
  // More passes per logit, but over an eighth of them: the sharded loss is faster, and the
  // gathered one also pays the all-gather of the logits.
  const LayerCosts s = simulate_layer_costs(shard, "baseline"), g = simulate_layer_costs(gathered, "baseline");
  CHECK(s.output_forward < g.output_forward);
  CHECK(s.output_backward < g.output_backward);
  CHECK(s.forward == g.forward);
  // Without TP there is nothing to shard: the key changes nothing.
  CHECK(logits_bytes(scenario(step(1, "aten", R"(, "loss_parallel": false)"))) == Approx(logits_bytes(scenario(step(1, "aten")))));
  // Megatron-LM's loss is vocabulary-parallel by construction.
  CHECK(test::scenario_error(step(8, "in_place", R"(, "loss_parallel": false)")).find("$.workload.loss_parallel") != std::string::npos);
  CHECK(test::scenario_error(step(8, "aten", R"(, "loss_parallel": 1)")).find("$.workload.loss_parallel") != std::string::npos);
}

TEST_CASE("the output layer's inputs are kept to its backward: gathered where PyTorch keeps them, sharded where Megatron-LM gathers again", "[step][memory]") {
  const double h = 4096, tokens = 16384, e = 2;
  const std::string saved = R"(, "tp_weight_grad_input": "saved")";
  // The final norm's input on this rank's sequence shard, and the output GEMM's input.
  CHECK(ledger_part(scenario(step(8, "aten")), "final norm and output layer inputs") == Approx(2 * tokens / 8 * h * e));
  CHECK(ledger_part(scenario(step(8, "aten", saved)), "final norm and output layer inputs") == Approx((tokens / 8 + tokens) * h * e));
  // Without TP both are the rank's whole microbatch.
  CHECK(ledger_part(scenario(step(1, "aten")), "final norm and output layer inputs") == Approx(2 * tokens * h * e));
}

TEST_CASE("a compiled loss holds only the logits and their gradient, and reads the logits once each way", "[step][loss][memory]") {
  const Scenario aten = scenario(step(1, "aten")), compiled = scenario(step(1, "compiled"));
  const double logits = 16384.0 * 128256;
  // Inductor's fused loss: the bf16 logits and the bf16 gradient it writes, 4 bytes a logit
  // against eager aten's 12.
  CHECK(logits_bytes(compiled) == Approx(4 * logits));
  CHECK(logits_bytes(aten) == Approx(12 * logits));
  const LayerCosts a = simulate_layer_costs(aten, "baseline"), c = simulate_layer_costs(compiled, "baseline");
  CHECK(c.output_forward < a.output_forward);
  CHECK(c.output_backward < a.output_backward);
  CHECK(c.forward == a.forward);
  // Still bounded by HBM: forward reads the logits the output GEMM wrote, backward reads them
  // and writes their gradient; the output GEMMs come on top.
  const double hbm = compiled.hardware.memory.hbm_bytes_per_ps;
  CHECK(static_cast<double>(c.output_forward) > 2 * logits / hbm);
  CHECK(static_cast<double>(c.output_backward) > 4 * logits / hbm);
  // With TP it is modelled on gathered logits only (loss_parallel false): every rank then
  // holds the whole vocabulary's.
  CHECK_THAT(test::scenario_error(step(8, "compiled")), Catch::Matchers::Contains("$.workload.cross_entropy: \"compiled\" is modelled on gathered logits"));
  CHECK(logits_bytes(scenario(step(8, "compiled", R"(, "loss_parallel": false)"))) == Approx(4 * logits));
}

// PyTorch's interleaved zero-bubble schedule in a whole step: each backward split into an
// input-gradient pass and a later weight-gradient pass (weight_gradients.hpp).
#include "support/catch.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "support/step_compute.hpp"
#include "tpsim/step/training_step.hpp"
#include "tpsim/step/weight_gradients.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

const std::string kSmall = R"({"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128, "layers": 16, "vocab": 32000})";

std::string doc(const std::string& extra, int seq_len = 4096, int microbatches = 8, const std::string& grad_input = "saved") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": {}, "seq_len": {}, "local_batch": {}, "mesh": {{"pp": 4, "tp": 2}},
                    "microbatches": {}, "tp_weight_grad_input": "{}"{}}},
      "variants": ["baseline"]}})",
                     kSmall, seq_len, microbatches, microbatches, grad_input, extra);
}

StepVariantRun run(const std::string& extra) {
  const Scenario s = parse_scenario(Json::parse(doc(extra)), "");
  return run_step_variant(s, "baseline", simulate_layer_costs(s, "baseline"));
}

int count_named(const StepVariantRun& r, const std::string& part) {
  int n = 0;
  for (const auto& t : r.plan.program.tasks) n += t.name.find(part) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("zero bubble moves the weight gradients into the bubble: a shorter step, the same work", "[step][pipeline][zero_bubble]") {
  for (int v : {1, 2}) {
    const std::string chunks = fmt::format(R"(, "virtual_stages": {})", v);
    const StepVariantRun base = run(v == 1 ? R"(, "pp_schedule": "1f1b")" : R"(, "pp_schedule": "interleaved_1f1b")" + chunks);
    const StepVariantRun zb = run(R"(, "pp_schedule": "interleaved_zero_bubble")" + chunks);
    INFO("virtual stages " << v);
    CHECK(zb.sim.makespan < base.sim.makespan);
    CHECK(zb.bubble_fraction < base.bubble_fraction);
    // Without checkpointing nothing runs twice: the split passes add up to the whole ones.
    CHECK(total_compute(zb) == total_compute(base));
    // Every layer and microbatch has one input half and one weight half, and no whole backward.
    CHECK(count_named(zb, ".backward_input.") == 16 * 8);
    CHECK(count_named(zb, ".backward_weight.") == 16 * 8);
    CHECK(count_named(zb, ".backward.") == 0);
    // The output gradients a layer keeps for its weight half raise the peak.
    CHECK(zb.peak_memory_bytes > base.peak_memory_bytes);
  }
}

TEST_CASE("under full checkpointing the weight half recomputes the forward again", "[step][pipeline][zero_bubble]") {
  const std::string ac = R"(, "activation_checkpoint": "full", "virtual_stages": 2)";
  const StepVariantRun base = run(R"(, "pp_schedule": "interleaved_1f1b")" + ac);
  const StepVariantRun zb = run(R"(, "pp_schedule": "interleaved_zero_bubble")" + ac);
  // One more forward per layer and microbatch: 16 layers x 8 microbatches over 4 stages.
  CHECK(total_compute(zb) - total_compute(base) == 16 * 8 * zb.costs.recompute);
  CHECK(zb.costs.recompute == zb.costs.forward);
  // ... and its TP communication: a forward's exposed TP time more per layer and microbatch (per stage).
  REQUIRE(zb.costs.forward_exposed_comm > 0);
  CHECK(zb.exposed_comm.at("tp") - base.exposed_comm.at("tp") ==
        Approx(16.0 * 8 / 4 * static_cast<double>(zb.costs.forward_exposed_comm)).epsilon(1e-9));
}

TEST_CASE("a layer's weight gradients are half its linear backward and scale with the tokens", "[step][zero_bubble]") {
  const Scenario a = parse_scenario(Json::parse(doc(R"(, "pp_schedule": "interleaved_zero_bubble")")), "");
  const Scenario b = parse_scenario(Json::parse(doc(R"(, "pp_schedule": "interleaved_zero_bubble")", 8192)), "");
  const Tick wa = layer_weight_gradients(a.workload.step, a.hardware, a.dtype), wb = layer_weight_gradients(b.workload.step, b.hardware, b.dtype);
  CHECK(static_cast<double>(wb) / static_cast<double>(wa) == Approx(2.0).epsilon(0.1));
  // dW and dX of a linear are GEMMs of the same FLOPs: the weight half is under half the backward
  // (which also runs attention, norms and TP communication) and more than a fifth of it.
  const LayerCosts c = simulate_layer_costs(a, "baseline");
  CHECK(c.backward_weight == wa);
  CHECK(c.backward_weight < c.backward / 2);
  CHECK(c.backward_weight > c.backward / 5);
  // The output gradients kept: per token, every linear's output width on this rank.
  const double per_token = (16 * 128 + 2 * 8 * 128) / 2.0 + 2048 + 2 * 8192 / 2.0 + 2048;
  CHECK(weight_gradient_inputs_bytes(a.workload.step, 2) == Approx(per_token * 4096 * 2));
}

TEST_CASE("zero bubble is refused where PyTorch cannot run it or tpsim does not model it", "[step][zero_bubble][contract]") {
  const auto error = [](const std::string& d) { return scenario_error(d); };
  CHECK_THAT(error(doc(R"(, "pp_schedule": "interleaved_zero_bubble", "compile": true)")), Catch::Matchers::Contains("workload.compile"));
  CHECK_THAT(error(doc(R"(, "pp_schedule": "interleaved_zero_bubble")", 4096, 8, "regather")),
             Catch::Matchers::Contains("workload.tp_weight_grad_input"));
  // 9 microbatches over pp 4 are 2 rounds, which 9 does not divide into.
  CHECK_THAT(error(doc(R"(, "pp_schedule": "interleaved_zero_bubble")", 4096, 9)), Catch::Matchers::Contains("workload.microbatches"));
  CHECK(error(doc(R"(, "pp_schedule": "interleaved_zero_bubble")", 4096, 10)).empty());
}

TEST_CASE("ZBV runs its chunks in a V: the output layer on rank 0, no send at the turn", "[step][pipeline][zero_bubble]") {
  const StepVariantRun inter = run(R"(, "pp_schedule": "interleaved_1f1b", "virtual_stages": 2)");
  const StepVariantRun v = run(R"(, "pp_schedule": "zbv_zero_bubble")");
  CHECK(v.plan.last_stage == 0);
  CHECK(inter.plan.last_stage == 3);
  // Chunks 3 and 4 both run on rank 3: what one hands the other stays in its memory.
  CHECK(count_named(v, "pp.send.activations.chunk3.") == 0);
  CHECK(count_named(v, "pp.send.gradients.chunk4.") == 0);
  CHECK(count_named(v, "pp.send.activations.chunk2.") == 8);
  // Rank 0 holds chunks 0 and 7: the embedding and the output layer.
  for (const auto& t : v.plan.program.tasks) {
    if (t.name.rfind("layer0.", 0) == 0 || t.name.rfind("layer15.", 0) == 0) CHECK(t.stage == 0);
  }
  // The same work (each stage's optimizer step, over other parameters now, rounds on its own).
  CHECK(std::abs(total_compute(v) - total_compute(inter)) <= 4);
  CHECK(optimizer_launch_spread(v, inter));
  CHECK(v.sim.makespan < inter.sim.makespan);
  CHECK_THAT(scenario_error(doc(R"(, "pp_schedule": "zbv_zero_bubble", "virtual_stages": 3)")), Catch::Matchers::Contains("workload.virtual_stages"));
  // DualPipeV needs a microbatch per stage: 8 over 4 ranks x 2 chunks is just enough.
  CHECK(scenario_error(doc(R"(, "pp_schedule": "dualpipev")")).empty());
  CHECK_THAT(scenario_error(doc(R"(, "pp_schedule": "dualpipev")", 4096, 4)), Catch::Matchers::Contains("workload.microbatches"));
}

TEST_CASE("MoE and MLA layers split too: the router's, experts' and latent projections' weight GEMMs", "[step][pipeline][zero_bubble][mla]") {
  const std::string model = R"({"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 16, "head_dim": 192, "layers": 8, "vocab": 32000,
      "q_lora_rank": 512, "kv_lora_rank": 256, "rope_head_dim": 64, "v_head_dim": 128,
      "experts": 8, "top_k": 2, "expert_ffn_hidden": 1024, "shared_experts": 1, "first_dense_layers": 1})";
  const auto step = [&](const std::string& schedule) {
    const Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
        "workload": {{"op": "training_step", "model": {}, "seq_len": 4096, "local_batch": 8, "mesh": {{"pp": 4, "ep": 2}},
                      "microbatches": 8, "pp_schedule": "{}"}}, "variants": ["baseline"]}})",
                                                              model, schedule)),
                                      "");
    return run_step_variant(s, "baseline", simulate_layer_costs(s, "baseline"));
  };
  const StepVariantRun one = step("1f1b"), v = step("zbv_zero_bubble");
  REQUIRE(v.costs.moe.has_value());
  CHECK(v.costs.moe->backward_weight > 0);
  CHECK(v.costs.moe->backward_weight < v.costs.moe->backward / 2);
  CHECK(v.costs.backward_weight > 0);  // the dense first layer's MLA and FFN
  CHECK(v.costs.backward_weight < v.costs.backward / 2);
  CHECK(std::abs(total_compute(v) - total_compute(one)) <= 8);
  CHECK(optimizer_launch_spread(v, one));
  CHECK(v.sim.makespan < one.sim.makespan);
  // DualPipeV on the same V: whole backwards and split ones mixed, the same work in all.
  const StepVariantRun dual = step("dualpipev");
  CHECK(count_named(dual, ".backward.") > 0);
  CHECK(count_named(dual, ".backward_input.") == count_named(dual, ".backward_weight."));
  CHECK(count_named(dual, ".backward_input.") > 0);
  CHECK(std::abs(total_compute(dual) - total_compute(one)) <= 8);
  CHECK(optimizer_launch_spread(dual, one));
  CHECK(dual.sim.makespan < one.sim.makespan);
}

#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/memory_ledger.hpp"
#include "tpsim/step/op_checkpoint.hpp"

using namespace tpsim;

namespace {

std::string step(int tp, const std::string& checkpoint, const std::string& extra = "", const std::string& model = "llama3_8b") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "{}", "seq_len": 8192, "local_batch": 2,
                    "mesh": {{"fsdp": {}, "tp": {}}}, "activation_checkpoint": "{}"{}}},
      "variants": ["baseline"]}})",
                     model, 8 / tp, tp, checkpoint, extra.empty() ? "" : ", " + extra);
}

Scenario scenario(const std::string& json) { return parse_scenario(Json::parse(json), ""); }

}  // namespace

TEST_CASE("the per-op policy keeps every other linear in call order", "[step][checkpoint]") {
  const Scenario s = scenario(step(1, "selective_op"));
  const auto linears = layer_linears(s.workload.step.model, 1);
  REQUIRE(linears.size() == 7);
  std::vector<std::string> kept, recomputed;
  for (std::size_t i = 0; i < linears.size(); ++i) (op_policy_keeps(i) ? kept : recomputed).push_back(linears[i].name);
  CHECK(kept == std::vector<std::string>{"attention.wq", "attention.wv", "ffn.w1", "ffn.w2"});
  CHECK(recomputed == std::vector<std::string>{"attention.wk", "attention.wo", "ffn.w3"});
  // Under TP each rank holds 1/tp of a column-parallel linear's outputs and the whole
  // (partial) output of a row-parallel one; Llama 3 8B's 8 KV heads give one per rank at tp 8.
  const auto sharded = layer_linears(s.workload.step.model, 8);
  CHECK(sharded[0].out == 512);
  CHECK(sharded[1].out == 128);
  CHECK(sharded[3].out == 4096);
  CHECK(sharded[3].row_parallel);
  CHECK(sharded[6].in == 14336 / 8);
}

TEST_CASE("the per-op policy keeps the layer input, attention output and kept linears' outputs", "[step][checkpoint][memory]") {
  const std::int64_t h = 4096, q = 4096, kv = 1024, f = 14336;
  const TrainingStepSpec one = scenario(step(1, "selective_op")).workload.step;
  CHECK(op_checkpoint_kept_per_token(one) == Approx(h + q + q + kv + f + h));
  // tp 8 with sequence parallelism: the row-parallel w2's whole partial output on every
  // rank, and the two reduce-scatters' sharded outputs.
  const TrainingStepSpec eight = scenario(step(8, "selective_op")).workload.step;
  CHECK(op_checkpoint_kept_per_token(eight) == Approx(h + q + q + kv + f + 8 * h + 2 * h));
  // It lies between what full checkpointing and no checkpointing keep.
  for (const TrainingStepSpec& t : {one, eight}) {
    const double op = activation_bytes_per_layer(t, Checkpointing::selective_op, 2);
    CHECK(op > activation_bytes_per_layer(t, Checkpointing::full, 2));
    CHECK(op < activation_bytes_per_layer(t, Checkpointing::none, 2));
  }
}

TEST_CASE("the per-op policy recomputes more than Megatron's selective and less than the forward", "[step][checkpoint]") {
  for (int tp : {1, 8}) {
    const Scenario sel = scenario(step(tp, "selective")), op = scenario(step(tp, "selective_op")), full = scenario(step(tp, "full"));
    const LayerCosts a = simulate_layer_costs(sel, "baseline"), b = simulate_layer_costs(op, "baseline"), c = simulate_layer_costs(full, "baseline");
    CHECK(b.recompute > a.recompute);
    CHECK(b.recompute < c.recompute);
    // At least the recomputed GEMMs (wk, wo, w3) alone.
    const TrainingStepSpec& t = op.workload.step;
    const auto l = layer_linears(t.model, tp);
    const std::int64_t m = t.rank_tokens();
    const Tick gemms = kernels_alone({{"wk", GemmOp{{m, l[1].out, l[1].in, Dtype::bf16}}},
                                      {"wo", GemmOp{{m, l[3].out, l[3].in, Dtype::bf16}}},
                                      {"w3", GemmOp{{m, l[5].out, l[5].in, Dtype::bf16}}}},
                                     op.hardware);
    CHECK(b.recompute > gemms);
  }
}

TEST_CASE("fp8 linears recompute in fp8: faster GEMMs than bf16 in spite of their casts", "[step][checkpoint]") {
  const LayerCosts bf16 = simulate_layer_costs(scenario(step(1, "selective_op")), "baseline");
  const LayerCosts fp8 = simulate_layer_costs(scenario(step(1, "selective_op", R"("linear_dtype": "fp8", "compile": true)")), "baseline");
  CHECK(fp8.recompute < bf16.recompute);
  // The kept activations do not depend on the linears' dtype (the policy sees aten.mm either way).
  CHECK(op_checkpoint_kept_per_token(scenario(step(1, "selective_op", R"("linear_dtype": "fp8")")).workload.step) ==
        Approx(op_checkpoint_kept_per_token(scenario(step(1, "selective_op")).workload.step)));
}

TEST_CASE("the per-op policy is refused where it is not modelled, naming the path", "[step][checkpoint][input]") {
  CHECK(test::scenario_error(step(1, "selective_op", R"("attention": "unfused")")).find("$.workload.activation_checkpoint") !=
        std::string::npos);
  const std::string moe = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "training_step",
      "model": {"hidden": 1024, "ffn_hidden": 4096, "heads": 8, "kv_heads": 8, "head_dim": 128, "layers": 4, "vocab": 32000,
                "experts": 8, "top_k": 2, "expert_ffn_hidden": 1024},
      "seq_len": 2048, "local_batch": 2, "mesh": {"ep": 8}, "activation_checkpoint": "selective_op"}, "variants": ["baseline"]})";
  CHECK(test::scenario_error(moe).find("has experts") != std::string::npos);
  CHECK(test::scenario_error(step(1, "selectve_op")).find("$.workload.activation_checkpoint") != std::string::npos);
}

#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/expert_parallel.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/memory_ledger.hpp"
#include "tpsim/step/op_checkpoint.hpp"
#include "tpsim/step/training_step.hpp"

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
  const auto linears = block_linears(s.workload.step.model, 1, false);
  REQUIRE(linears.size() == 7);
  std::vector<std::string> kept, recomputed;
  for (std::size_t i = 0; i < linears.size(); ++i) (op_policy_keeps(i) ? kept : recomputed).push_back(linears[i].name);
  CHECK(kept == std::vector<std::string>{"attention.wq", "attention.wv", "ffn.w1", "ffn.w2"});
  CHECK(recomputed == std::vector<std::string>{"attention.wk", "attention.wo", "ffn.w3"});
  // Eager PyTorch reruns all three. Compiled code drops wo where its output goes only to a kept
  // reduce-scatter (TP with sequence parallelism); without one the recomputed residual add reads it.
  std::vector<std::string> eager, compiled, compiled_no_rs;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (op_policy_reruns(linears[i], i, false, true)) eager.push_back(linears[i].name);
    if (op_policy_reruns(linears[i], i, true, true)) compiled.push_back(linears[i].name);
    if (op_policy_reruns(linears[i], i, true, false)) compiled_no_rs.push_back(linears[i].name);
  }
  CHECK(eager == recomputed);
  CHECK(compiled == std::vector<std::string>{"attention.wk", "ffn.w3"});
  CHECK(compiled_no_rs == recomputed);
  // Under TP each rank holds 1/tp of a column-parallel linear's outputs and the whole
  // (partial) output of a row-parallel one; Llama 3 8B's 8 KV heads give one per rank at tp 8.
  const auto sharded = block_linears(s.workload.step.model, 8, false);
  CHECK(sharded[0].out == 512);
  CHECK(sharded[1].out == 128);
  CHECK(sharded[3].out == 4096);
  CHECK(sharded[3].row_parallel);
  CHECK(sharded[6].in == 14336 / 8);
}

TEST_CASE("the per-op policy keeps the layer input, attention output and kept linears' outputs", "[step][checkpoint][memory]") {
  const std::int64_t h = 4096, q = 4096, kv = 1024, f = 14336;
  const TrainingStepSpec one = scenario(step(1, "selective_op")).workload.step;
  CHECK(op_checkpoint_kept_per_token(one, false) == Approx(h + q + q + kv + f + h));
  // tp 8 with sequence parallelism: the row-parallel w2's whole partial output on every
  // rank, and the two reduce-scatters' sharded outputs.
  const TrainingStepSpec eight = scenario(step(8, "selective_op")).workload.step;
  CHECK(op_checkpoint_kept_per_token(eight, false) == Approx(h + q + q + kv + f + 8 * h + 2 * h));
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
    const auto l = block_linears(t.model, tp, false);
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
  CHECK(op_checkpoint_kept_per_token(scenario(step(1, "selective_op", R"("linear_dtype": "fp8")")).workload.step, false) ==
        Approx(op_checkpoint_kept_per_token(scenario(step(1, "selective_op")).workload.step, false)));
}

namespace {

// A small model with experts (top 2 of 8, optionally one shared expert, optionally MLA), on 8
// GPUs as `mesh`.
std::string moe_step(const std::string& mesh, const std::string& checkpoint, bool shared, bool mla) {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {{"op": "training_step",
      "model": {{"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": {}, "head_dim": {}, "layers": 4, "vocab": 32000,
                "experts": 8, "top_k": 2, "expert_ffn_hidden": 1024{}{}}},
      "seq_len": 4096, "local_batch": 2, "mesh": {}, "activation_checkpoint": "{}"}}, "variants": ["baseline"]}})",
                     mla ? 16 : 4, mla ? 192 : 128, shared ? R"(, "shared_experts": 1)" : "",
                     mla ? R"(, "q_lora_rank": 512, "kv_lora_rank": 256, "rope_head_dim": 64, "v_head_dim": 128)" : "", mesh,
                     checkpoint);
}

std::pair<std::vector<std::string>, std::vector<std::string>> kept_and_recomputed(const std::vector<LayerLinear>& linears) {
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  for (std::size_t i = 0; i < linears.size(); ++i) (op_policy_keeps(i) ? out.first : out.second).push_back(linears[i].name);
  return out;
}

}  // namespace

TEST_CASE("the per-op policy counts MLA's five mm calls and a MoE layer's shared experts in call order", "[step][checkpoint]") {
  // MLA (torchtitan deepseek_v3/model.py: wq_a, wq_b, wkv_a, wkv_b, wo), then a dense FFN:
  // the parity moves on, so the FFN keeps w3 where Llama's keeps w1 and w2.
  const TrainingStepSpec mla = scenario(moe_step(R"({"ep": 8})", "selective_op", true, true)).workload.step;
  const auto [mla_kept, mla_recomputed] = kept_and_recomputed(block_linears(mla.model, 1, false));
  CHECK(mla_kept == std::vector<std::string>{"attention.wq_a", "attention.wkv_a", "attention.wo", "ffn.w3"});
  CHECK(mla_recomputed == std::vector<std::string>{"attention.wq_b", "attention.wkv_b", "ffn.w1", "ffn.w2"});
  // Without a query latent MLA calls wq, wkv_a, wkv_b, wo: the Llama parity again.
  ModelShape direct = mla.model;
  direct.mla.q_lora_rank = 0;
  const auto [direct_kept, direct_recomputed] = kept_and_recomputed(block_linears(direct, 1, false));
  CHECK(direct_kept == std::vector<std::string>{"attention.wq", "attention.wkv_b", "ffn.w1", "ffn.w2"});
  CHECK(direct_recomputed == std::vector<std::string>{"attention.wkv_a", "attention.wo", "ffn.w3"});
  // A MoE layer's shared experts follow the attention (the router's gate is forced to
  // recompute and not counted; the routed experts' grouped GEMMs are not aten.mm).
  const TrainingStepSpec gqa = scenario(moe_step(R"({"ep": 8})", "selective_op", true, false)).workload.step;
  const auto [moe_kept, moe_recomputed] = kept_and_recomputed(block_linears(gqa.model, 1, true));
  CHECK(moe_kept == std::vector<std::string>{"attention.wq", "attention.wv", "ffn.w1", "ffn.w2"});
  CHECK(moe_recomputed == std::vector<std::string>{"attention.wk", "attention.wo", "ffn.w3"});
  CHECK(block_linears(gqa.model, 1, true)[4].out == 1024);  // one shared expert's width
  const TrainingStepSpec no_shared = scenario(moe_step(R"({"ep": 8})", "selective_op", false, false)).workload.step;
  CHECK(block_linears(no_shared.model, 1, true).size() == 4);
  // A dense layer's list is the Llama layer's.
  const std::vector<std::string> llama = {"attention.wq", "attention.wk", "attention.wv", "attention.wo", "ffn.w1", "ffn.w3", "ffn.w2"};
  const auto dense = block_linears(gqa.model, 2, false);
  REQUIRE(dense.size() == llama.size());
  for (std::size_t i = 0; i < dense.size(); ++i) CHECK(dense[i].name == llama[i]);
  // MLA's up projections read the latents, not the gathered input: an fp8 cast of their own.
  const auto ml = block_linears(mla.model, 2, false);
  CHECK(ml[0].reads_gathered_input());
  CHECK_FALSE(ml[1].reads_gathered_input());
  CHECK(ml[1].input != ml[3].input);
}

TEST_CASE("under expert parallelism the policy keeps both all-to-alls' outputs and none of the experts' own", "[step][checkpoint][memory]") {
  const double h = 2048;
  for (bool shared : {false, true}) {
    const TrainingStepSpec ep = scenario(moe_step(R"({"ep": 8})", "selective_op", shared, false)).workload.step;
    const TrainingStepSpec no_ep = scenario(moe_step(R"({"fsdp": 8})", "selective_op", shared, false)).workload.step;
    // Uniform routing: top_k = 2 slots a token, dispatched and combined, each a whole hidden vector.
    CHECK(op_checkpoint_kept_per_token(ep, true) - op_checkpoint_kept_per_token(no_ep, true) == Approx(2 * 2 * h));
    // Without EP nothing of the routed path is kept: the layer input, the attention output,
    // wq and wv (16 and 4 heads of 128), and the shared expert's w1 and w2.
    CHECK(op_checkpoint_kept_per_token(no_ep, true) == Approx(h + 2048 + 2048 + 512 + (shared ? 1024 + h : 0)));
    for (const TrainingStepSpec& t : {ep, no_ep}) {
      const double op = activation_bytes_per_layer(t, Checkpointing::selective_op, 2, true);
      CHECK(op > activation_bytes_per_layer(t, Checkpointing::full, 2, true));
      CHECK(op < activation_bytes_per_layer(t, Checkpointing::none, 2, true));
    }
  }
}

TEST_CASE("a MoE layer under the per-op policy reruns its routed experts but not their all-to-alls", "[step][checkpoint]") {
  for (bool mla : {false, true}) {
    const Scenario op = scenario(moe_step(R"({"ep": 8})", "selective_op", true, mla));
    const Scenario full = scenario(moe_step(R"({"ep": 8})", "full", true, mla));
    const LayerCosts a = simulate_layer_costs(op, "baseline"), b = simulate_layer_costs(full, "baseline");
    REQUIRE(a.moe.has_value());
    REQUIRE(b.moe.has_value());
    // Full checkpointing reruns the whole forward, the all-to-alls included; the policy keeps
    // their outputs, so it saves at least their time.
    const MoeLayerCost r = simulate_moe_layer(op.workload.step, op.hardware, op.dtype, false);
    REQUIRE(r.forward_all_to_all > 0);
    CHECK(b.moe->recompute - a.moe->recompute >= r.forward_all_to_all);
    // ...and reruns at least the busiest rank's expert GEMMs.
    Tick experts = 0;
    for (const auto& [name, payload] : busiest_rank_expert_ops(op.workload.step, op.dtype, false, 1))
      if (std::holds_alternative<GemmOp>(payload)) experts += kernels_alone({{name, payload}}, op.hardware);
    REQUIRE(experts > 0);
    CHECK(a.moe->recompute > experts);
    // A dense layer of the same model reruns less than its whole forward.
    CHECK(a.recompute > 0);
    CHECK(a.recompute < b.recompute);
  }
}

TEST_CASE("a MoE + MLA step under the per-op policy lies between no and full checkpointing in time and memory", "[step][checkpoint]") {
  const auto run = [](const std::string& checkpoint) {
    StepResult r = run_training_step(scenario(moe_step(R"({"ep": 8})", checkpoint, true, true)));
    REQUIRE(r.runs.size() == 1);
    return r.runs.front();
  };
  const StepVariantRun none = run("none"), op = run("selective_op"), full = run("full");
  CHECK(none.sim.makespan < op.sim.makespan);
  CHECK(op.sim.makespan < full.sim.makespan);
  CHECK(full.peak_memory_bytes < op.peak_memory_bytes);
  CHECK(op.peak_memory_bytes < none.peak_memory_bytes);
}

TEST_CASE("the per-op policy is refused where it is not modelled, naming the path", "[step][checkpoint][input]") {
  CHECK(test::scenario_error(step(1, "selective_op", R"("attention": "unfused")")).find("$.workload.activation_checkpoint") !=
        std::string::npos);
  CHECK(test::scenario_error(step(1, "selectve_op")).find("$.workload.activation_checkpoint") != std::string::npos);
  // Experts and latent attention are modelled.
  CHECK_NOTHROW(scenario(moe_step(R"({"ep": 8})", "selective_op", true, true)));
}

TEST_CASE("without checkpointing a MoE layer keeps the expert outputs the routing scores multiply, in fp32 under eager PyTorch", "[step][checkpoint][memory]") {
  // torchtitan's combine multiplies routed_output.to(float32) by the scores: autograd keeps the
  // fp32 copy for the scores' gradient, top_k whole hidden vectors per token on every TP rank.
  const double tokens = 2 * 4096, h = 2048, top_k = 2;
  for (const char* mesh : {R"({"ep": 8})", R"({"ep": 4, "tp": 2})"}) {
    INFO(mesh);
    const TrainingStepSpec fused = scenario(moe_step(mesh, "none", true, false)).workload.step;
    const TrainingStepSpec eager = scenario(moe_step(std::string(mesh) + R"(, "elementwise": "aten")", "none", true, false)).workload.step;
    CHECK(activation_bytes_per_layer(eager, Checkpointing::none, 2, true) - activation_bytes_per_layer(fused, Checkpointing::none, 2, true) ==
          Approx(tokens * top_k * h * (4 - 2)));
    // The per-op policy recomputes the multiply from the kept all-to-all output: no change.
    CHECK(activation_bytes_per_layer(eager, Checkpointing::selective_op, 2, true) ==
          Approx(activation_bytes_per_layer(fused, Checkpointing::selective_op, 2, true)));
    // A dense layer has nothing of it.
    CHECK(activation_bytes_per_layer(eager, Checkpointing::none, 2, false) == Approx(activation_bytes_per_layer(fused, Checkpointing::none, 2, false)));
  }
}

TEST_CASE("under async TP a recomputed all-gather is fused with the recomputed linears that read it", "[step][checkpoint][async_tp]") {
  const Scenario s = scenario(step(8, "selective_op", R"("tp_weight_grad_input": "saved")"));
  const TrainingStepSpec& t = s.workload.step;
  // The callback sees each gathered input once, with the recomputed linears reading it:
  // wk on the attention's input, w3 on the FFN's (wq, wv and w1 are kept).
  std::vector<std::vector<std::int64_t>> seen;
  const FusedGather record = [&](std::int64_t tokens, std::int64_t in, const std::vector<std::int64_t>& outs, Dtype) {
    CHECK(tokens == t.rank_tokens());
    CHECK(in == t.model.hidden);
    seen.push_back(outs);
    return Tick{0};
  };
  const Tick nccl = op_checkpoint_recompute(t, s.hardware, s.dtype, false);
  const Tick free_gathers = op_checkpoint_recompute(t, s.hardware, s.dtype, false, record);
  const auto linears = block_linears(t.model, 8, false);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<std::int64_t>{linears[1].out});  // wk
  CHECK(seen[1] == std::vector<std::int64_t>{linears[5].out});  // w3
  // Taking the gathers and their consumers away leaves less to recompute, but not nothing.
  CHECK(free_gathers < nccl);
  CHECK(free_gathers > 0);
  // A layer's recomputation: async TP's runs its gathers fused, the baseline's NCCL's.
  CHECK(simulate_layer_costs(s, "baseline").recompute == nccl);
  const Tick fused = simulate_layer_costs(s, "async_tp").recompute;
  INFO("recompute: NCCL gathers " << to_us(nccl) << " us, fused " << to_us(fused) << " us");
  // Copy-engine pulls under w3's submatmuls beat NCCL's exposed ring here.
  CHECK(fused < nccl);
  CHECK(fused > free_gathers);
}

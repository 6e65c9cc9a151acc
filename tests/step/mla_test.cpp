// Multi-head latent attention (DeepSeek-V2/V3): low-rank query and key/value latents, keys
// and values up-projected per head, 192-wide queries and keys against 128-wide values.
#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/cost/attention_cost.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/step/context_parallel.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

const ModelShape& deepseek() {
  static const ModelShape m = parse_scenario(Json::parse(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "deepseek_v3_like", "seq_len": 4096, "local_batch": 1, "mesh": {"ep": 8}},
      "variants": ["baseline"]})"), "").workload.step.model;
  return m;
}

// A small dense model whose attention is MLA (or, without the MLA keys, its MHA twin of the
// same heads and head width), as one TP-8 layer.
std::string layer(bool mla, const std::string& extra = "") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "tokens": 16384, "seq_len": 4096, "pass": "forward_backward",
                    "model": {{"hidden": 4096, "ffn_hidden": 11008, "heads": 32, "kv_heads": 32, "head_dim": 192{}}}{}}},
      "variants": ["baseline", "async_tp"]}})",
                     mla ? R"(, "q_lora_rank": 1024, "kv_lora_rank": 512, "rope_head_dim": 64, "v_head_dim": 128)" : "", extra);
}

double gemm_flops(const VariantRun& run) {
  double f = 0;
  for (OpId id = 0; id < run.dag.size(); ++id)
    if (const auto* g = std::get_if<GemmOp>(&run.dag.op(id).payload)) f += g->problem.flops();
  return f;
}

}  // namespace

TEST_CASE("DeepSeek-V3's parameters come out as published: 671B in all, about 37B a token", "[step][mla]") {
  const ModelShape& m = deepseek();
  REQUIRE(m.is_mla());
  double total = 2 * m.embedding_params(), active = 2 * m.embedding_params();  // untied embedding and output
  for (std::int64_t l = 0; l < m.layers; ++l) total += m.layer_params(l), active += m.active_layer_params(l);
  INFO("total " << total / 1e9 << " B, active " << active / 1e9 << " B, attention " << m.attention_params() / 1e6 << " M a layer");
  // DeepSeek-V3 technical report (arXiv 2412.19437): 671B total, 37B activated per token
  // (the multi-token-prediction module's 14B is not part of the main model).
  CHECK(total == Approx(671e9).epsilon(0.005));
  CHECK(active == Approx(37e9).epsilon(0.03));
  // Multi-head attention of the same 128 heads x 192 would hold 2.5x the attention weights.
  ModelShape mha = m;
  mha.mla = {};
  CHECK(mha.attention_params() > 2.5 * m.attention_params());
}

TEST_CASE("MLA attention reads 192-wide queries and keys and 128-wide values: FLOPs and bytes follow both widths", "[cost][mla]") {
  AttentionProblem mla{8192, 4096, 16, 16, 192, true, false, Dtype::bf16, AttentionKernel::newest, 128};
  AttentionProblem wide = mla, narrow = mla;
  wide.v_head_dim = 0;  // values as wide as keys
  narrow.head_dim = 128, narrow.v_head_dim = 0;
  // Q K^T scales with the key width, P V with the value width.
  CHECK(attention_flops(mla) == Approx(2.0 * 8192 * 4096 * 16 * (192 + 128) * 0.5));
  CHECK(attention_flops(narrow) < attention_flops(mla));
  CHECK(attention_flops(mla) < attention_flops(wide));
  CHECK(attention_bytes(narrow) < attention_bytes(mla));
  CHECK(attention_bytes(mla) < attention_bytes(wide));
  // Ordinary attention is unchanged: 4 x tokens x seq x head_dim x heads, half for causal.
  CHECK(attention_flops(narrow) == Approx(4.0 * 8192 * 4096 * 128 * 16 * 0.5));
}

TEST_CASE("An MLA layer runs every variant with the same FLOPs, its down projections replicated on every TP rank", "[strategies][mla]") {
  const RunResult mla = simulate(layer(true)), mha = simulate(layer(false));
  const double f_mla = gemm_flops(variant(mla, "baseline"));
  CHECK(gemm_flops(variant(mla, "async_tp")) == Approx(f_mla));
  // Multiply-adds per token summed over the 8 ranks (forward; backward is twice it for both):
  // MHA's Q, K, V, O split by heads: 4 x 4096 x 6144. MLA's down projections are replicated,
  // every rank computes them (8 x 4096 x (1024 + 576)); its up projections and output are
  // split: 1024 x 6144 + 512 x 32 x 256 + 4096 x 4096. The FFN is the same: 3 x 4096 x 11008.
  const double ffn = 3.0 * 4096 * 11008, mha_attention = 4.0 * 4096 * 6144;
  const double mla_attention = 8.0 * 4096 * (1024 + 576) + 1024.0 * 6144 + 512.0 * 32 * 256 + 4096.0 * 4096;
  CHECK(f_mla / gemm_flops(variant(mha, "baseline")) == Approx((mla_attention + ffn) / (mha_attention + ffn)).epsilon(0.005));
  CHECK(makespan_us(mla, "baseline") < makespan_us(mha, "baseline"));
  // Backward sums the replicated down projections' gradients over the TP group.
  bool summed = false;
  const Dag& dag = variant(mla, "baseline").dag;
  for (OpId id = 0; id < dag.size(); ++id) summed = summed || dag.op(id).name == "attention.latent_weights.grad_all_reduce";
  CHECK(summed);
}

TEST_CASE("MLA input errors name their path", "[io][mla]") {
  CHECK_THAT(scenario_error(layer(false, "").replace(layer(false, "").find(R"("head_dim": 192)"), 15, R"("head_dim": 192, "kv_lora_rank": 512)")),
             Catch::Matchers::Contains("$.workload.model.q_lora_rank: missing: multi-head latent attention needs"));
  CHECK_THAT(scenario_error(layer(true, R"(, "attention": "unfused")")),
             Catch::Matchers::Contains("$.workload.attention: \"unfused\" is not modelled for multi-head latent attention"));
  std::string gqa = layer(true);
  gqa.replace(gqa.find(R"("kv_heads": 32)"), 14, R"("kv_heads": 8)");
  CHECK_THAT(scenario_error(gqa), Catch::Matchers::Contains("$.workload.model.kv_heads: with multi-head latent attention every head"));
  std::string rope = layer(true);
  rope.replace(rope.find(R"("rope_head_dim": 64)"), 19, R"("rope_head_dim": 192)");
  CHECK_THAT(scenario_error(rope), Catch::Matchers::Contains("$.workload.model.rope_head_dim: 192 rotary dims leave none"));
}

TEST_CASE("MLA under context parallelism moves its per-head keys and values: 192 + 128 wide, not twice the key width", "[step][mla][cp]") {
  const auto step = [](bool mla, int cp) {
    return parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16",
        "workload": {{"op": "training_step", "seq_len": 8192, "local_batch": 1, "mesh": {{"tp": 8, "cp": {}}},
                      "model": {{"hidden": 4096, "ffn_hidden": 11008, "heads": 32, "kv_heads": 32, "head_dim": 192, "layers": 4,
                                 "vocab": 32000{}}}}},
        "variants": ["baseline"]}})", 8 * cp, cp,
                                                  mla ? R"(, "q_lora_rank": 1024, "kv_lora_rank": 512, "rope_head_dim": 64, "v_head_dim": 128)"
                                                      : "")),
                          "");
  };
  const Scenario mla = step(true, 2), mha = step(false, 2);
  // This rank's 4096 tokens (both chunks), its 4 heads: K 192 and V 128 wide against 192 and 192.
  const double tokens = 4096, heads = 4;
  CHECK(cp_kv_block_bytes(mla.workload.step, 2) == Approx(tokens * heads * (192 + 128) * 2));
  CHECK(cp_kv_block_bytes(mha.workload.step, 2) == Approx(tokens * heads * (192 + 192) * 2));
  // The loop runs, and is faster than its MHA twin's (narrower values: fewer FLOPs and bytes).
  const StepResult a = run_training_step(mla), b = run_training_step(mha);
  CHECK(a.runs.front().costs.cp_forward_exposed >= 0);
  CHECK(a.runs.front().costs.forward < b.runs.front().costs.forward);
  // Splitting the sequence over more ranks leaves the step's model FLOPs alone.
  CHECK(run_training_step(step(true, 4)).model_flops == Approx(a.model_flops));
}

TEST_CASE("A training step bounds MLA's widest projection before it builds anything", "[step][mla]") {
  // 4096 heads of 128 + 128 keys and values from the latent: 131072 tokens x 1048576 outputs.
  const std::string big = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "seq_len": 131072, "local_batch": 1, "mesh": {"fsdp": 8},
        "model": {"hidden": 4096, "ffn_hidden": 11008, "heads": 4096, "kv_heads": 4096, "head_dim": 192, "layers": 2, "vocab": 32000,
                  "q_lora_rank": 1024, "kv_lora_rank": 512, "rope_head_dim": 64, "v_head_dim": 128}},
      "variants": ["baseline"]})";
  CHECK_THAT(test::scenario_error(big), Catch::Matchers::Contains("$.workload.model: a 131072 x 1048576 operand"));
}

TEST_CASE("MLA without a query latent (q_lora_rank 0) projects the query with one wq: DeepSeek-V2-Lite's 15.7B come out", "[step][mla]") {
  // DeepSeek-V2-Lite (DeepSeek-V2 report, arXiv 2405.04434; its config.json: q_lora_rank null,
  // kv_lora_rank 512, 16 heads of 128 + 64 rotary, values 128, 27 layers, the first dense
  // (10944 wide), then 64 routed experts of 1408 (top 6) and 2 shared, vocabulary 102400).
  const ModelShape lite = parse_scenario(Json::parse(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "seq_len": 4096, "local_batch": 1, "mesh": {"ep": 8},
        "model": {"hidden": 2048, "ffn_hidden": 10944, "heads": 16, "kv_heads": 16, "head_dim": 192, "layers": 27, "vocab": 102400,
                  "q_lora_rank": 0, "kv_lora_rank": 512, "rope_head_dim": 64, "v_head_dim": 128,
                  "experts": 64, "top_k": 6, "expert_ffn_hidden": 1408, "shared_experts": 2, "first_dense_layers": 1}},
      "variants": ["baseline"]})"), "").workload.step.model;
  REQUIRE(lite.is_mla());
  REQUIRE_FALSE(lite.mla_query_latent());
  double total = 2 * lite.embedding_params(), active = lite.embedding_params();  // the input embedding is a lookup
  for (std::int64_t l = 0; l < lite.layers; ++l) total += lite.layer_params(l), active += lite.active_layer_params(l);
  INFO("total " << total / 1e9 << " B, active " << active / 1e9 << " B");
  // Published: 15.7B in all, 2.4B activated per token.
  CHECK(total == Approx(15.7e9).epsilon(0.005));
  CHECK(active == Approx(2.4e9).epsilon(0.03));
  // The query projection: one 2048 x 3072 wq in place of a down and an up projection.
  ModelShape with_latent = lite;
  with_latent.mla.q_lora_rank = 1536;
  CHECK(with_latent.attention_params() - lite.attention_params() == Approx(2048.0 * 1536 + 1536.0 * 3072 + 1536 - 2048.0 * 3072));
}

TEST_CASE("An MLA layer without a query latent multiplies by wq split by heads, the key-value latent replicated", "[strategies][mla]") {
  std::string direct = layer(true);
  direct.replace(direct.find(R"("q_lora_rank": 1024)"), 19, R"("q_lora_rank": 0)");
  const RunResult mla = simulate(direct), mha = simulate(layer(false));
  const double f = gemm_flops(variant(mla, "baseline"));
  CHECK(gemm_flops(variant(mla, "async_tp")) == Approx(f));
  // Per token over the 8 ranks: wq 4096 x 6144 split by heads, the KV down projection on every
  // rank (8 x 4096 x 576), the KV up projection and wo split: 512 x 32 x 256 + 4096 x 4096.
  const double ffn = 3.0 * 4096 * 11008, mha_attention = 4.0 * 4096 * 6144;
  const double attention = 4096.0 * 6144 + 8.0 * 4096 * 576 + 512.0 * 32 * 256 + 4096.0 * 4096;
  CHECK(f / gemm_flops(variant(mha, "baseline")) == Approx((attention + ffn) / (mha_attention + ffn)).epsilon(0.005));
}

#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/report/result_writers.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

// PyTorch's TP keeps each column-parallel linear's gathered input for its weight gradient.
std::string layer_pass(const std::string& pass, const std::string& regions = "", const std::string& weight_grad_input = "saved") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "model": "llama3_8b", "tokens": 16384, "seq_len": 8192, "pass": "{}",
                    "tp_weight_grad_input": "{}"}},
      {}"variants": ["baseline", "async_tp"]}})",
                     pass, weight_grad_input, regions.empty() ? "" : fmt::format(R"("software": {{"async_tp_regions": "{}"}}, )", regions));
}

// Rank 0's NCCL collectives by op name.
std::vector<std::string> collectives(const VariantRun& run) {
  std::vector<std::string> names;
  for (OpId id = 0; id < run.dag.size(); ++id)
    if (run.dag.op(id).rank == 0 && std::holds_alternative<CollectiveOp>(run.dag.op(id).payload)) names.push_back(run.dag.op(id).name);
  return names;
}

bool has_op(const VariantRun& run, const std::string& name) {
  for (OpId id = 0; id < run.dag.size(); ++id)
    if (run.dag.op(id).rank == 0 && run.dag.op(id).name == name) return true;
  return false;
}

}  // namespace

TEST_CASE("torch.compile's micro-pipeline pass leaves the summed input gradients' reduce-scatters to NCCL", "[layer][async_tp]") {
  // Forward: every all-gather feeds its matmuls and every reduce-scatter has one producer
  // matmul, so all four are decomposed.
  const auto fwd = simulate(layer_pass("forward"));
  CHECK(collectives(variant(fwd, "async_tp")).empty());
  // Backward: wq's, wk's and wv's (and w1's and w3's) input gradients are summed before their
  // reduce-scatter; the pass fuses a reduce-scatter only with the one matmul producing its input.
  const auto bwd = simulate(layer_pass("backward"));
  const auto left = collectives(variant(bwd, "async_tp"));
  REQUIRE(left.size() == 2);
  CHECK(left[0].find("ffn.w13.backward_input") != std::string::npos);
  CHECK(left[1].find("attention.qkv.backward_input") != std::string::npos);
  // The row-parallel linears' gathered output gradients are decomposed for their input
  // gradients; their weight gradients take the gathered tensor as the contraction and run
  // whole on what the fused op returns.
  CHECK(has_op(variant(bwd, "async_tp"), "ffn.w2.backward.matmul.shard0"));
  CHECK(has_op(variant(bwd, "async_tp"), "ffn.w2.backward.unfused.matmul"));
  CHECK_FALSE(has_op(variant(bwd, "async_tp"), "ffn.w2.backward.matmul.shard0.1"));
  // Asked to decompose every region, nothing is left to NCCL; the FLOPs are the same either way.
  const auto every = simulate(layer_pass("backward", "every"));
  CHECK(collectives(variant(every, "async_tp")).empty());
  CHECK(variant(every, "async_tp").metrics.flops == Approx(variant(bwd, "async_tp").metrics.flops).epsilon(1e-12));
  // What stays exposed costs time: the pass's coverage is never faster than every region's,
  // and the baseline is untouched by the choice.
  CHECK(makespan_us(bwd, "async_tp") > makespan_us(every, "async_tp"));
  CHECK(makespan_us(bwd, "baseline") == makespan_us(every, "baseline"));
  CHECK(variant(bwd, "async_tp").metrics.exposed_comm > variant(every, "async_tp").metrics.exposed_comm);
  // Gathering a column-parallel input again for its weight gradient (Megatron-LM's way) gives
  // the pass no matmul taking the gathered tensor as its left operand: two more NCCL all-gathers.
  const auto regather = simulate(layer_pass("backward", "", "regather"));
  CHECK(collectives(variant(regather, "async_tp")).size() == 4);
}

TEST_CASE("async_tp_regions accepts micro_pipeline or every, and says so in the result", "[layer][async_tp][io]") {
  CHECK(scenario_error(layer_pass("forward", "all")) == "$.software.async_tp_regions: unknown choice \"all\" (micro_pipeline or every)");
  CHECK(result_json(simulate(layer_pass("forward", "every")))["software"]["async_tp_regions"] == "every");
  CHECK(result_json(simulate(layer_pass("forward")))["software"]["async_tp_regions"] == "micro_pipeline");
}

TEST_CASE("MLA's up projections read a latent, not the gathered input: they run whole after the fused all-gather", "[layer][async_tp][mla]") {
  const auto r = simulate(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "attention", "tokens": 16384, "seq_len": 8192, "pass": "forward",
                   "model": {"hidden": 7168, "ffn_hidden": 18432, "heads": 128, "kv_heads": 128, "head_dim": 192,
                             "q_lora_rank": 1536, "kv_lora_rank": 512, "rope_head_dim": 64, "v_head_dim": 128}},
      "variants": ["async_tp"]})");
  const auto& run = variant(r, "async_tp");
  // wq_a and wkv_a per shard; wq_b and wkv_b whole, once.
  CHECK(has_op(run, "attention.qkv.matmul.shard0.0"));
  CHECK(has_op(run, "attention.qkv.matmul.shard0.1"));
  CHECK_FALSE(has_op(run, "attention.qkv.matmul.shard0.2"));
  CHECK(has_op(run, "attention.qkv.unfused.matmul.0"));
  CHECK(has_op(run, "attention.qkv.unfused.matmul.1"));
}

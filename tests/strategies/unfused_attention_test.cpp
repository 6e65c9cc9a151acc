// Attention run as Megatron-LM's DotProductAttention: batched GEMMs and memory-bound
// kernels over the materialized scores.
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/cost/attention_cost.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/memory_ledger.hpp"
#include "tpsim/step/training_step.hpp"
#include "tpsim/strategies/unfused_attention.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

// 22B-like heads on one of 8 TP ranks: 8 heads of 96, two 2048-token sequences.
const AttentionOp kForward{4096, 2048, 8, 8, 96, true, false, Dtype::fp16};

AttentionOp backward_of(AttentionOp a) {
  a.backward = true;
  return a;
}

double gemm_flops(const std::vector<std::pair<std::string, OpPayload>>& kernels) {
  double f = 0;
  for (const auto& [name, op] : kernels)
    if (const auto* g = std::get_if<GemmOp>(&op)) f += g->problem.flops();
  return f;
}

double kernel_bytes(const std::vector<std::pair<std::string, OpPayload>>& kernels) {
  double b = 0;
  for (const auto& [name, op] : kernels)
    if (const auto* e = std::get_if<ElementwiseOp>(&op)) b += e->bytes_read + e->bytes_written;
  return b;
}

std::string layer(const std::string& attention, int tokens = 8192, int seq = 2048) {
  return fmt::format(R"({{"hardware": "a100_sxm", "gpus": 8, "dtype": "fp16",
      "workload": {{"op": "attention", "model": "llama3_8b", "tokens": {}, "seq_len": {}, "pass": "forward_backward"{}}}}})",
                     tokens, seq, attention);
}

std::string step(const std::string& extra, const std::string& checkpoint = "none") {
  return fmt::format(R"({{"hardware": "a100_sxm", "gpus": 8, "dtype": "fp16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 2048, "local_batch": 2, "mesh": {{"tp": 8}},
                    "activation_checkpoint": "{}", "microbatches": 2{}}}}})",
                     checkpoint, extra);
}

}  // namespace

TEST_CASE("Unfused attention computes the whole score matrix: twice a causal flash kernel's matmul FLOPs", "[attention][unfused]") {
  const auto fwd = unfused_attention_kernels(kForward, 0);
  const auto bwd = unfused_attention_kernels(backward_of(kForward), 0);
  // Forward: Q K^T and P V, each 2 t s d per head; backward: four such GEMMs.
  const double one = 2.0 * 4096 * 2048 * 96 * 8;
  CHECK(gemm_flops(fwd) == Approx(2 * one));
  CHECK(gemm_flops(bwd) == Approx(4 * one));
  // Flash skips the masked half: the unfused forward does twice its matmul work.
  CHECK(gemm_flops(fwd) == Approx(2 * attention_flops(kForward)));
}

TEST_CASE("Unfused attention's memory-bound kernels move the scores: bytes grow with the sequence at fixed tokens", "[attention][unfused]") {
  AttentionOp longer = kForward;
  longer.seq_len *= 2;  // half the sequences, each four times the scores
  const double scores = 4096.0 * 2048 * 8 * 2;  // bytes of one pass over the fp16 scores
  const double permute = 2 * 4096.0 * 8 * 96 * 2;
  // Softmax reads and writes them; dropout reads them and writes them and a one-byte mask.
  CHECK(kernel_bytes(unfused_attention_kernels(kForward, 0)) == Approx(2 * scores + permute));
  CHECK(kernel_bytes(unfused_attention_kernels(kForward, 0.1)) == Approx(4 * scores + scores / 2 + permute));
  CHECK(kernel_bytes(unfused_attention_kernels(longer, 0)) - permute == Approx(2 * (kernel_bytes(unfused_attention_kernels(kForward, 0)) - permute)));
  // On an A100 they are slower than the fused kernel, which never writes the scores out.
  const HardwareSpec a100 = load_hardware_file(models_dir() + "/a100_sxm.json");
  CHECK(kernels_alone(unfused_attention_kernels(kForward, 0.1), a100) > kernels_alone({{"flash", kForward}}, a100));
  // GQA: K and V are repeated to the query heads first, and their gradients summed back.
  AttentionOp gqa = kForward;
  gqa.kv_heads = 2;
  CHECK(unfused_attention_kernels(gqa, 0).front().first == "attention.kv_repeat");
  CHECK(unfused_attention_kernels(backward_of(gqa), 0).back().first == "attention.kv_repeat.backward");
}

TEST_CASE("A layer with unfused attention runs its kernels on every rank and takes longer than with flash", "[attention][unfused]") {
  const RunResult flash = simulate(layer(""));
  const RunResult unfused = simulate(layer(R"(, "attention": "unfused", "attention_dropout": 0.1)"));
  CHECK(makespan_us(unfused, "baseline") > makespan_us(flash, "baseline"));
  int softmax = 0, flash_kernels = 0;
  const Dag& dag = variant(unfused, "baseline").dag;
  for (OpId id = 0; id < static_cast<OpId>(dag.size()); ++id) {
    softmax += dag.op(id).name == "attention.softmax";
    flash_kernels += std::holds_alternative<AttentionOp>(dag.op(id).payload);
  }
  CHECK(softmax == 8);
  CHECK(flash_kernels == 0);
}

TEST_CASE("Unfused attention keeps 5as^2b/t bytes a layer with dropout (Korthikanti et al.), none with selective recomputation", "[attention][unfused][memory]") {
  const auto spec = [&](const std::string& extra) { return parse_scenario(Json::parse(step(extra)), "").workload.step; };
  const TrainingStepSpec flash = spec(""), unfused = spec(R"(, "attention": "unfused", "attention_dropout": 0.1)"),
                         no_dropout = spec(R"(, "attention": "unfused")");
  // a = 32 heads, s = 2048, b = 1 sequence per microbatch, t = 8; fp16.
  const double as2b_t = 32.0 * 2048 * 2048 * 1 / 8;
  const auto act = [](const TrainingStepSpec& t, Checkpointing c) { return activation_bytes_per_layer(t, c, 2.0); };
  CHECK(act(unfused, Checkpointing::none) - act(flash, Checkpointing::none) == Approx(5 * as2b_t));
  CHECK(act(no_dropout, Checkpointing::none) - act(flash, Checkpointing::none) == Approx(2 * as2b_t));
  // Megatron's selective recomputation keeps everything but the attention core's tensors.
  CHECK(act(unfused, Checkpointing::selective) == Approx(act(flash, Checkpointing::none)));
  CHECK(act(unfused, Checkpointing::full) == Approx(act(flash, Checkpointing::full)));
}

TEST_CASE("Selective recomputation with unfused attention reruns the attention core's forward kernels", "[attention][unfused]") {
  const auto step_ms = [](const std::string& json) {
    return to_us(run_training_step(parse_scenario(Json::parse(json), "")).runs[0].sim.makespan) / 1e3;
  };
  const std::string unfused = R"(, "attention": "unfused", "attention_dropout": 0.1)";
  const double none = step_ms(step(unfused)), selective = step_ms(step(unfused, "selective")), full = step_ms(step(unfused, "full"));
  CHECK(none < selective);
  CHECK(selective < full);
}

TEST_CASE("Attention choices are checked: name, dropout range, flash dropout, context parallelism", "[attention][unfused][input]") {
  CHECK(scenario_error(layer(R"(, "attention": "unfuse")")).find("$.workload.attention: unknown value \"unfuse\" (did you mean \"unfused\"?)") !=
        std::string::npos);
  CHECK(scenario_error(layer(R"(, "attention": "unfused", "attention_dropout": 1.5)")).find("$.workload.attention_dropout") != std::string::npos);
  CHECK(scenario_error(layer(R"(, "attention_dropout": 0.1)")).find("\"unfused\" only") != std::string::npos);
  const std::string ffn = R"({"hardware": "a100_sxm", "gpus": 8, "dtype": "fp16",
      "workload": {"op": "ffn", "model": "llama3_8b", "tokens": 8192, "seq_len": 2048, "attention": "unfused"}})";
  CHECK(scenario_error(ffn).find("$.workload: unknown key \"attention\"") != std::string::npos);
  const std::string cp = R"({"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"tp": 8, "cp": 2},
                   "attention": "unfused"}})";
  CHECK(scenario_error(cp).find("$.workload.attention") != std::string::npos);
}

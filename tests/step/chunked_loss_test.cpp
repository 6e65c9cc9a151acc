// torchtitan's ChunkedLossWrapper (`loss_chunks`): the output layer and loss run chunk by
// chunk with their backward inside the loss call (step/output_layer.hpp).
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/output_layer.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

const std::string kSmall = R"({"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128, "layers": 16, "vocab": 32000})";

std::string doc(const std::string& mesh, int chunks, const std::string& extra = "") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": {}, "seq_len": 4096, "local_batch": 4, "mesh": {},
                    "cross_entropy": "aten", "loss_chunks": {}{}}},
      "variants": ["baseline"]}})",
                     kSmall, mesh, chunks, extra);
}

Scenario scenario(const std::string& json) { return parse_scenario(Json::parse(json), ""); }

StepVariantRun run(const Scenario& s) { return run_step_variant(s, "baseline", simulate_layer_costs(s, "baseline")); }

double ledger_part(const StepVariantRun& r, const std::string& part) {
  for (const auto& [kind, bytes] : r.memory.at(static_cast<std::size_t>(r.plan.last_stage)).parts)
    if (kind == part) return bytes;
  return -1;
}

// Fsdp reduce-scatter time the program charges on one stage, and how many tasks a name part has.
Tick reduce_scatter_work(const StepVariantRun& r, int stage) {
  Tick t = 0;
  for (const auto& task : r.plan.program.tasks)
    if (task.communication && task.stage == stage && task.name.rfind("fsdp.reduce_scatter", 0) == 0) t += task.work;
  return t;
}
int count_named(const StepVariantRun& r, const std::string& part) {
  int n = 0;
  for (const auto& t : r.plan.program.tasks) n += t.name.find(part) != std::string::npos;
  return n;
}
Tick collective_time(const StepVariantRun& r, const std::string& op) {
  for (const auto& c : r.plan.collectives)
    if (c.op == op) return c.cost.time;
  return -1;
}

}  // namespace

TEST_CASE("a chunked loss holds one chunk's logits: the logits' memory falls as 1/chunks down to the gradient's copy", "[step][loss][memory]") {
  // tp 2, fsdp 4, no pipeline: one microbatch of 4 x 4096 tokens; loss_parallel holds 16
  // bytes a logit of this rank's vocabulary half.
  const double rank_tokens = 4 * 4096.0, vocab = 32000 / 2, h = 2048, e = 2;
  double previous = 0;
  for (int n : {1, 2, 4, 8, 16}) {
    const StepVariantRun r = run(scenario(doc(R"({"fsdp": 4, "tp": 2})", n)));
    const double logits = 16 * rank_tokens / n * vocab;
    INFO(n << " chunks");
    if (n == 1) {
      CHECK(ledger_part(r, "logits and loss") == Approx(logits));
      CHECK(ledger_part(r, "chunked loss's input-gradient buffer (fp32)") < 0);
      previous = logits;
      continue;
    }
    // One chunk's logits (or, after the loop, the gradient cast back to bf16 in their place),
    // and GradAccumulator's fp32 [tokens, hidden] buffer.
    const double chunk = ledger_part(r, "logits and loss (one chunk)");
    CHECK(chunk == Approx(std::max(logits, rank_tokens * h * e)));
    CHECK(ledger_part(r, "chunked loss's input-gradient buffer (fp32)") == Approx(rank_tokens * h * 4));
    // Doubling the chunks halves the logits while they outweigh the gradient's copy.
    if (logits > rank_tokens * h * e) CHECK(chunk == Approx(previous / 2));
    previous = chunk;
  }
  // The whole ledger: 8 chunks save the logits less the buffer.
  const StepVariantRun one = run(scenario(doc(R"({"fsdp": 4, "tp": 2})", 1))), eight = run(scenario(doc(R"({"fsdp": 4, "tp": 2})", 8)));
  CHECK(one.memory.at(0).total() - eight.memory.at(0).total() ==
        Approx(16 * rank_tokens * vocab * (1 - 1.0 / 8) - rank_tokens * h * 4));
}

TEST_CASE("a chunked loss runs the output layer's backward inside the loss call, and pays for the chunking", "[step][loss]") {
  for (const char* mesh : {R"({"fsdp": 8})", R"({"fsdp": 4, "tp": 2})"}) {
    INFO(mesh);
    const Scenario whole = scenario(doc(mesh, 1)), chunked = scenario(doc(mesh, 8));
    const OutputLayerCosts a = simulate_output_layer(whole.workload.step, whole.hardware, whole.dtype);
    const OutputLayerCosts b = simulate_output_layer(chunked.workload.step, chunked.hardware, chunked.dtype);
    // Backward keeps only the final norm's gradient and the TP reduce-scatter.
    CHECK(b.backward < a.backward / 10);
    // The same GEMM work in eighths, plus the gradient accumulation (fp32 for FSDP's unsharded
    // output gradient, the input gradient's buffer) and eight times the loss's all-reduces.
    CHECK(b.forward + b.backward > a.forward + a.backward);
    // ...but not by more than the accumulation passes could cost at a quarter of HBM speed.
    const double v = 32000.0 / chunked.workload.step.mesh.size(MeshDim::tp), h = 2048, tokens = 16384;
    const double extra_bytes = 8 * v * h * (2 + 4) + 2 * tokens * h * (2 + 4) + tokens * h * 4 * 2;
    CHECK(static_cast<double>(b.forward + b.backward - a.forward - a.backward) <
          extra_bytes / (0.25 * chunked.hardware.memory.hbm_bytes_per_ps) + 8 * 3 * 50e6);
  }
  // The loader: torchtitan's wrapper is around aten's loss, and its chunks split the tokens evenly.
  CHECK_THAT(scenario_error(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": {}, "seq_len": 4096, "local_batch": 4, "mesh": {{"fsdp": 8}},
                    "loss_chunks": 8}}, "variants": ["baseline"]}})", kSmall)),
             Catch::Matchers::Contains("$.workload.loss_chunks: is torchtitan's chunked loss"));
  CHECK_THAT(scenario_error(doc(R"({"fsdp": 8})", 3)), Catch::Matchers::Contains("$.workload.loss_chunks: 3 chunks do not divide"));
  CHECK_THAT(scenario_error(doc(R"({"fsdp": 8})", 0)), Catch::Matchers::Contains("$.workload.loss_chunks"));
}

TEST_CASE("under a zero-bubble schedule a chunked loss leaves no output weight gradient for the weight pass", "[step][loss][pipeline]") {
  const std::string zb = R"(, "pp_schedule": "interleaved_zero_bubble", "microbatches": 4, "tp_weight_grad_input": "saved")";
  const Scenario whole = scenario(doc(R"({"pp": 2, "tp": 2, "fsdp": 2})", 1, zb)), chunked = scenario(doc(R"({"pp": 2, "tp": 2, "fsdp": 2})", 8, zb));
  CHECK(simulate_layer_costs(whole, "baseline").output_backward_weight > 0);
  CHECK(simulate_layer_costs(chunked, "baseline").output_backward_weight == 0);
}

TEST_CASE("under a pipeline a chunked loss gathers and reduces the output layer every microbatch", "[step][loss][pipeline][fsdp]") {
  const std::string pp = R"(, "microbatches": 4)";
  const StepVariantRun whole = run(scenario(doc(R"({"pp": 2, "tp": 2, "fsdp": 2})", 1, pp)));
  const StepVariantRun chunked = run(scenario(doc(R"({"pp": 2, "tp": 2, "fsdp": 2})", 8, pp)));
  const int last = chunked.plan.last_stage;
  // One reduce-scatter per microbatch at the loss, and the gather again for every one after the first.
  CHECK(count_named(chunked, "fsdp.reduce_scatter.output.loss.") == 4);
  CHECK(count_named(chunked, "fsdp.all_gather.output.loss.") == 3);
  CHECK(count_named(whole, ".output.loss.") == 0);
  // Conservation: the stage reduces the output layer's gradient four times instead of once;
  // the layers' own reduce-scatters are unchanged.
  const Tick edge = collective_time(chunked, "reduce_scatter (embedding or output layer)");
  REQUIRE(edge > 0);
  CHECK(reduce_scatter_work(chunked, last) - reduce_scatter_work(whole, last) == 3 * edge);
  CHECK(reduce_scatter_work(chunked, 1 - last) == reduce_scatter_work(whole, 1 - last));
  // Without a pipeline FSDP reduces every microbatch anyway: no extra collectives.
  const StepVariantRun flat = run(scenario(doc(R"({"tp": 2, "fsdp": 4})", 8)));
  CHECK(count_named(flat, ".output.loss.") == 0);
}

// PyTorch's pipelining holds a receive buffer per stage and microbatch for activations and
// for gradients, and each forward's output until its backward (stage.py); Megatron-LM's
// runtime does neither, whether its sends block or not (pp_runtime).
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

const std::string kSmall = R"({"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128, "layers": 16, "vocab": 32000})";

StepVariantRun run(const std::string& extra, int microbatches = 8) {
  const Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": {}, "seq_len": 4096, "local_batch": {}, "mesh": {{"pp": 4, "tp": 2}},
                    "microbatches": {}, "activation_checkpoint": "full"{}}},
      "variants": ["baseline"]}})",
                                                            kSmall, microbatches, microbatches, extra)),
                                    "");
  return run_step_variant(s, "baseline", simulate_layer_costs(s, "baseline"));
}

double part(const StepVariantRun& r, int stage, const std::string& kind) {
  for (const auto& [k, b] : r.memory.at(static_cast<std::size_t>(stage)).parts)
    if (k == kind) return b;
  return 0;
}

}  // namespace

TEST_CASE("PyTorch's pipelining holds a receive buffer per microbatch for each neighbour a stage receives from", "[step][pipeline][memory]") {
  // One microbatch of 4096 tokens crosses a stage boundary as its TP shard: 2048 x 2048 bf16.
  const double boundary = 4096.0 / 2 * 2048 * 2;
  const StepVariantRun torch = run(""), megatron = run(R"(, "pp_p2p": "blocking")");
  // 1F1B, 4 stages of one chunk: the first receives only gradients, the last only
  // activations, the others both; 8 microbatches each.
  CHECK(part(torch, 0, "pipeline receive buffers") == Approx(8 * boundary));
  CHECK(part(torch, 1, "pipeline receive buffers") == Approx(16 * boundary));
  CHECK(part(torch, 2, "pipeline receive buffers") == Approx(16 * boundary));
  CHECK(part(torch, 3, "pipeline receive buffers") == Approx(8 * boundary));
  // Twice the microbatches, twice the buffers.
  CHECK(part(run("", 16), 1, "pipeline receive buffers") == Approx(32 * boundary));
  for (int s = 0; s < 4; ++s) CHECK(part(megatron, s, "pipeline receive buffers") == 0);
  // Interleaving puts two chunks on each rank: rank 0 holds the first chunk (gradients only)
  // and a middle one (both).
  const StepVariantRun interleaved = run(R"(, "pp_schedule": "interleaved_1f1b", "virtual_stages": 2)");
  CHECK(part(interleaved, 0, "pipeline receive buffers") == Approx(3 * 8 * boundary));
}

TEST_CASE("PyTorch's pipelining keeps each forward's output to its backward, whose input is the receive buffer", "[step][pipeline][memory]") {
  const double boundary = 4096.0 / 2 * 2048 * 2;
  const StepVariantRun torch = run(""), megatron = run(R"(, "pp_p2p": "blocking")");
  // 1F1B: stage s has 4 - s microbatches in flight at its peak. The first stage adds each
  // one's output; the middle ones trade their first layer's input (the buffer) for their
  // output; the last has no output to keep and its first input is the buffer.
  for (int s = 0; s < 4; ++s) {
    INFO("stage " << s);
    const double delta = torch.sim.stages[static_cast<std::size_t>(s)].peak_activation_bytes -
                         megatron.sim.stages[static_cast<std::size_t>(s)].peak_activation_bytes;
    const double in_flight = 4 - s;
    if (s == 0) CHECK(delta == Approx(in_flight * boundary));
    if (s == 1 || s == 2) CHECK(delta == Approx(0).margin(1));
    if (s == 3) CHECK(delta == Approx(-in_flight * boundary));
  }
}

TEST_CASE("An output layer alone in its chunk finds the final norm's input in a receive buffer, counted once", "[step][pipeline][memory]") {
  // 16 layers over 4 stages with the output counted as 5 layers: the last chunk holds it alone.
  const std::string alone = R"(, "pp_last_stage_less_layers": 5)";
  const StepVariantRun torch = run(alone), megatron = run(alone + R"(, "pp_p2p": "blocking")");
  const int last = torch.plan.last_stage;
  REQUIRE(torch.plan.layers_of_chunk.back().size() == 1);
  REQUIRE(torch.plan.layers_of_chunk.back().front() < 0);
  const double shard = 4096.0 / 2 * 2048 * 2;  // one microbatch's final-norm input on a TP rank
  CHECK(part(megatron, last, "final norm and output layer inputs") - part(torch, last, "final norm and output layer inputs") == Approx(shard));
  // With a decoder layer before it in the chunk, the norm's input is that layer's output.
  CHECK(part(run(""), 3, "final norm and output layer inputs") == Approx(part(run(R"(, "pp_p2p": "blocking")"), 3, "final norm and output layer inputs")));
}

TEST_CASE("Megatron-LM's runtime frees a stage's outputs whether its sends block or not: pp_runtime without changing the timing",
          "[step][pipeline][memory]") {
  // Megatron-LM's interleaved schedule with overlap_p2p_comm sends asynchronously and still
  // receives into fresh tensors and frees what it sent; so did Meta's Llama 3 pipeline.
  const StepVariantRun torch = run(""), megatron_async = run(R"(, "pp_runtime": "megatron")"),
                       megatron_blocking = run(R"(, "pp_p2p": "blocking")");
  for (int s = 0; s < 4; ++s) {
    INFO("stage " << s);
    CHECK(part(torch, s, "pipeline receive buffers") > 0);
    CHECK(part(megatron_async, s, "pipeline receive buffers") == 0);
    CHECK(megatron_async.sim.stages[static_cast<std::size_t>(s)].peak_activation_bytes ==
          Approx(megatron_blocking.sim.stages[static_cast<std::size_t>(s)].peak_activation_bytes));
    CHECK(megatron_async.memory.at(static_cast<std::size_t>(s)).total() < torch.memory.at(static_cast<std::size_t>(s)).total());
  }
  // Memory is all it changes: the same sends, unwaited, at the same times.
  CHECK(megatron_async.sim.makespan == torch.sim.makespan);
  CHECK(megatron_blocking.sim.makespan > torch.sim.makespan);
}

TEST_CASE("pp_runtime is checked: PyTorch's pipelining has no blocking sends", "[step][pipeline][input]") {
  const auto with = [](const std::string& extra) {
    return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
        "workload": {{"op": "training_step", "model": {}, "seq_len": 4096, "local_batch": 8, "mesh": {{"pp": 4, "tp": 2}},
                      "microbatches": 8{}}}, "variants": ["baseline"]}})",
                       kSmall, extra);
  };
  CHECK(scenario_error(with(R"(, "pp_runtime": "torch", "pp_p2p": "blocking")"))
            .find("$.workload.pp_runtime: \"torch\" sends asynchronously") != std::string::npos);
  CHECK(scenario_error(with(R"(, "pp_runtime": "megatrn")")).find("$.workload.pp_runtime: unknown value \"megatrn\" (did you mean \"megatron\"?)") !=
        std::string::npos);
  CHECK(scenario_error(with(R"(, "pp_runtime": "megatron", "pp_p2p": "blocking")")).empty());
}

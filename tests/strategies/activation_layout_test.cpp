// Batch-first activations ([b, s, h], torchtitan) against sequence-first ones ([s, b, h],
// Megatron-LM): PyTorch's functional collectives gather and scatter along the first
// dimension, so a tensor sharded along its second is copied into place around each NCCL
// all-gather and reduce-scatter, and PyTorch's fused async-TP ops flatten it into rows.
#include "support/catch.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/io/training_step_loader.hpp"
#include "tpsim/step/op_checkpoint.hpp"
#include "tpsim/step/output_layer.hpp"
#include "tpsim/strategies/registry.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

constexpr double kGpus = 8, kHidden = 8192, kBytes = 2;

std::string layer(const std::string& layout, std::int64_t tokens, const std::string& pass = "forward_backward") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "model": "llama3_70b", "tokens": {}, "seq_len": 8192, "pass": "{}",
                   "tp_weight_grad_input": "saved", "activation_layout": "{}"}},
      "variants": ["baseline", "async_tp", "ring"]}})",
                     tokens, pass, layout);
}

struct Copies {
  int count = 0;
  double bytes = 0;  // read by them (each writes as much)
};

// Rank 0's ops whose name ends with `suffix`, and what they read.
Copies ops_ending(const Dag& dag, const std::string& suffix) {
  Copies c;
  for (OpId id : dag.program(0)) {
    const Op& op = dag.op(id);
    if (!op.name.ends_with(suffix)) continue;
    ++c.count;
    c.bytes += std::get<ElementwiseOp>(op.payload).bytes_read;
  }
  return c;
}

// Rank 0's NCCL collectives of `kind` and the bytes of their whole buffers.
Copies collectives(const Dag& dag, CollectiveKind kind) {
  Copies c;
  for (OpId id : dag.program(0))
    if (const auto* op = std::get_if<CollectiveOp>(&dag.op(id).payload); op && op->kind == kind) ++c.count, c.bytes += op->buffer_bytes;
  return c;
}

Dag layer_dag(const std::string& layout, std::int64_t tokens, const std::string& variant) {
  return build_layer_dag(parse_scenario(Json::parse(layer(layout, tokens)), ""), variant);
}

}  // namespace

TEST_CASE("Batch-first activations copy every NCCL all-gather's output and reduce-scatter's input into place", "[strategies][tp]") {
  const Dag dag = layer_dag("batch_first", 8192, "baseline");
  const Copies gathers = collectives(dag, CollectiveKind::all_gather), scatters = collectives(dag, CollectiveKind::reduce_scatter);
  const Copies cats = ops_ending(dag, ".cat"), chunk_cats = ops_ending(dag, ".chunk_cat");
  // Forward: QKV's and w1/w3's inputs; backward: the output gradients of the out projection and w2.
  CHECK(gathers.count == 4);
  CHECK(scatters.count == 4);
  // One copy a collective, of exactly its whole buffer: what NCCL gathered, or what it will scatter.
  CHECK(cats.count == gathers.count);
  CHECK(cats.bytes == Approx(gathers.bytes).epsilon(1e-12));
  CHECK(chunk_cats.count == scatters.count);
  CHECK(chunk_cats.bytes == Approx(scatters.bytes).epsilon(1e-12));
  CHECK(cats.bytes == Approx(4 * 8192 * kHidden * kBytes).epsilon(1e-12));
  // Sequence-first: the same collectives, no copy.
  const Dag megatron = layer_dag("sequence_first", 8192, "baseline");
  CHECK(collectives(megatron, CollectiveKind::all_gather).count == 4);
  CHECK(ops_ending(megatron, ".cat").count == 0);
  CHECK(ops_ending(megatron, ".chunk_cat").count == 0);
}

TEST_CASE("PyTorch's fused async-TP ops flatten batch-first tensors only when a shard holds several sequences", "[strategies][tp]") {
  // One sequence: movedim and flatten are views. The reduce-scatters async TP leaves to NCCL
  // (QKV's and w1/w3's summed input gradients) still copy their input into place.
  const Dag one = layer_dag("batch_first", 8192, "async_tp");
  CHECK(ops_ending(one, ".flatten_shard").count == 0);
  CHECK(ops_ending(one, ".flatten_input").count == 0);
  CHECK(ops_ending(one, ".reshape_gathered").count == 0);
  CHECK(ops_ending(one, ".chunk_cat").count == 2);
  CHECK(ops_ending(one, ".cat").count == 0);
  // Two sequences: each fused all-gather flattens its shard first, each fused reduce-scatter
  // its matmul's input, and the weight gradients read the gathered tensors reshaped.
  const Dag two = layer_dag("batch_first", 16384, "async_tp");
  const Copies shards = ops_ending(two, ".flatten_shard"), gathered = ops_ending(two, ".reshape_gathered");
  CHECK(shards.count == 4);  // QKV's and w1/w3's inputs, the out projection's and w2's output gradients
  CHECK(shards.bytes == Approx(4 * 16384 / kGpus * kHidden * kBytes).epsilon(1e-12));
  CHECK(ops_ending(two, ".flatten_input").count == 2);  // the out projection's and w2's inputs
  // The four weight gradients on gathered tensors: QKV's and w1/w3's kept inputs, and the
  // out projection's and w2's gathered output gradients; each a whole [T, h].
  CHECK(gathered.count == 4);
  CHECK(gathered.bytes == Approx(4 * 16384 * kHidden * kBytes).epsilon(1e-12));
}

TEST_CASE("The copies cost time as memory-bound kernels do, and only PyTorch's paths pay them", "[strategies][tp]") {
  const RunResult batch = simulate(layer("batch_first", 16384)), sequence = simulate(layer("sequence_first", 16384));
  const double copied = 8 * 16384 * kHidden * kBytes * 2;  // eight [T, h] tensors, read and written
  const double hbm_us = copied / h100().memory.hbm_bytes_per_ps * 1e-6;
  const double extra = makespan_us(batch, "baseline") - makespan_us(sequence, "baseline");
  INFO("baseline: " << makespan_us(sequence, "baseline") << " -> " << makespan_us(batch, "baseline") << " us; the copies' bytes alone "
                    << hbm_us << " us");
  // On the critical path of one stream, each at least its bytes over the HBM (and less than
  // twice that: a copy streams at the HBM's rate after its start-up).
  CHECK(extra >= hbm_us);
  CHECK(extra < 2 * hbm_us);
  CHECK(makespan_us(batch, "async_tp") > makespan_us(sequence, "async_tp"));
  // tpsim's ring decomposition lays its buffers out itself.
  CHECK(makespan_us(batch, "ring") == makespan_us(sequence, "ring"));
  CHECK_THAT(scenario_error(layer("batch_major", 8192)), Catch::Contains("$.workload.activation_layout"));
}

TEST_CASE("Batch-first activations copy the output layer's gathered input and its gradient, and only under TP", "[step][tp]") {
  const auto output_layer = [](const std::string& mesh, const std::string& layout) {
    const Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
        "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {},
                     "activation_layout": "{}"}}, "variants": ["baseline"]}})",
                                                              mesh, layout)),
                                      "");
    return simulate_output_layer(s.workload.step, s.hardware, s.dtype);
  };
  const OutputLayerCosts megatron = output_layer(R"({"tp": 8})", "sequence_first"), titan = output_layer(R"({"tp": 8})", "batch_first");
  // One copy of the gathered [T, 4096] input each way: at least its bytes over the HBM, read and written.
  const double copy_us = 2 * 16384 * 4096 * kBytes / h100().memory.hbm_bytes_per_ps * 1e-6;
  CHECK(to_us(titan.forward - megatron.forward) >= copy_us);
  CHECK(to_us(titan.forward - megatron.forward) < 2 * copy_us);
  CHECK(to_us(titan.backward - megatron.backward) >= copy_us);
  // Without TP nothing is gathered.
  CHECK(output_layer(R"({"fsdp": 8})", "batch_first").forward == output_layer(R"({"fsdp": 8})", "sequence_first").forward);
}

TEST_CASE("A batch-first layout on a mesh without sequence-parallel TP is noted as unused", "[step][tp]") {
  const auto notes_for = [](const std::string& mesh) {
    const Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
        "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {},
                     "activation_layout": "batch_first"}}, "variants": ["baseline"]}})",
                                                              mesh)),
                                      "");
    const std::vector<std::string> notes = check_training_hardware(s.workload.step, s.gpus, s.hardware);
    return std::ranges::any_of(notes, [](const std::string& n) { return n.starts_with("activation_layout applies"); });
  };
  CHECK(notes_for(R"({"fsdp": 8})"));
  CHECK_FALSE(notes_for(R"({"tp": 8})"));
}

TEST_CASE("Layout copies are their own kind on the critical path, timed as copies of the same bytes", "[strategies][tp]") {
  const Dag dag = layer_dag("batch_first", 8192, "baseline");
  int layout = 0;
  for (OpId id : dag.program(0)) {
    const Op& op = dag.op(id);
    const bool copy = op.name.ends_with(".cat") || op.name.ends_with(".chunk_cat");
    CHECK(copy == (op_kind_name(op) == "layout_copy"));
    layout += copy;
  }
  CHECK(layout == 8);
  ElementwiseOp plain{64.0 * 1024 * 1024, 64.0 * 1024 * 1024}, marked = plain;
  marked.layout_copy = true;
  CHECK(kernel_alone_us(marked) == kernel_alone_us(plain));
  const RunResult r = simulate(layer("batch_first", 16384));
  CHECK(r.runs.front().metrics.critical_path.by_kind.contains("layout_copy"));
}

TEST_CASE("Per-op checkpointing's rerun all-gathers copy into place as the forward's do", "[step][tp]") {
  const auto recompute = [](const std::string& layout) {
    const Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
        "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {{"tp": 8}},
                     "activation_checkpoint": "selective_op", "compile": true, "activation_layout": "{}"}}, "variants": ["baseline"]}})",
                                                              layout)),
                                      "");
    return op_checkpoint_recompute(s.workload.step, s.hardware, s.dtype, false);
  };
  // NCCL's all-gathers of the attention's and the FFN's inputs, each followed by a copy of the
  // gathered [T, h]: at least those bytes over the HBM, read and written.
  const double copies_us = 2 * 2 * 16384 * 4096 * kBytes / h100().memory.hbm_bytes_per_ps * 1e-6;
  const double extra = to_us(recompute("batch_first") - recompute("sequence_first"));
  CHECK(extra >= copies_us);
  CHECK(extra < 2 * copies_us);
}

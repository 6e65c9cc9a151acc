// torchao's float8 tensor parallelism (float8/float8_tensor_parallel.py): the gathered
// operand of each TP all-gather is cast to fp8 on its shard, after an all-reduce of its amax.
#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/strategies/registry.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

Scenario layer(bool fp8_linears, bool fp8_gathers, const std::string& pass = "forward_backward", bool compile = false) {
  Scenario s = llama3_70b_tp8_layer(pass);
  if (fp8_linears) s.workload.linear_dtype = Dtype::fp8;
  s.workload.tp_gathers_in_linear_dtype = fp8_gathers;
  s.workload.compile = compile;
  return s;
}

int count_suffix(const Dag& dag, const std::string& suffix, int rank = 0) {
  int n = 0;
  for (OpId id : dag.program(rank)) n += dag.op(id).name.ends_with(suffix);
  return n;
}

double cast_read(const Dag& dag, const std::string& name) {
  const Op* op = find_op(dag, name);
  REQUIRE(op != nullptr);
  return std::get<ElementwiseOp>(op->payload).bytes_read;
}

}  // namespace

TEST_CASE("fp8 TP all-gathers move one byte per element: half of bf16's", "[strategies][fp8]") {
  const Dag bf16 = build_layer_dag(layer(true, false), "baseline"), fp8 = build_layer_dag(layer(true, true), "baseline");
  for (const char* region : {"attention.qkv", "ffn.w13", "ffn.w2.backward", "attention.out.backward"}) {
    const Op *a = find_op(bf16, std::string(region) + ".all_gather"), *b = find_op(fp8, std::string(region) + ".all_gather");
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(std::get<CollectiveOp>(b->payload).buffer_bytes == std::get<CollectiveOp>(a->payload).buffer_bytes / 2);
  }
  // Reduce-scatters carry the GEMMs' bf16 outputs either way.
  CHECK(std::get<CollectiveOp>(find_op(fp8, "attention.out.reduce_scatter")->payload).buffer_bytes ==
        std::get<CollectiveOp>(find_op(bf16, "attention.out.reduce_scatter")->payload).buffer_bytes);
}

TEST_CASE("Cast before the gather: the shared operand's cast reads its shard, 1/G of the gathered tensor", "[strategies][fp8]") {
  const Scenario s = layer(true, true);
  const Dag before = build_layer_dag(s, "baseline"), after = build_layer_dag(layer(true, false), "baseline");
  const double shard = 16384.0 / 8 * 8192, whole = 16384.0 * 8192;  // [T/G, H] against [T, H]
  // The QKV weights' elements are cast too (H x (Q + 2 KV) / G); the input is what differs.
  CHECK(cast_read(after, "attention.qkv.cast") - cast_read(before, "attention.qkv.cast") ==
        Approx(2.0 * (whole - shard) * 2).epsilon(1e-12));  // eager: two passes over bf16
}

TEST_CASE("Each fp8 TP all-gather waits for one all-reduce of its amax over the TP group", "[strategies][fp8]") {
  const Dag fp8 = build_layer_dag(layer(true, true), "baseline");
  // Forward: the QKV and w1/w3 inputs; backward: the two output gradients and the two inputs
  // gathered again for the weight gradients.
  CHECK(count_suffix(fp8, ".amax_all_reduce") == 2 + 4);
  CHECK(count_suffix(build_layer_dag(layer(true, false), "baseline"), ".amax_all_reduce") == 0);
  CHECK(count_suffix(build_layer_dag(layer(false, true), "baseline"), ".amax_all_reduce") == 0);  // bf16 linears: nothing to cast
  const Op* amax = find_op(fp8, "attention.qkv.amax_all_reduce");
  REQUIRE(amax != nullptr);
  CHECK(std::get<CollectiveOp>(amax->payload).kind == CollectiveKind::all_reduce);
  CHECK(std::get<CollectiveOp>(amax->payload).buffer_bytes == 4);
}

TEST_CASE("fp8 TP all-gathers shorten the layer for both the baseline and async TP", "[strategies][fp8]") {
  for (const char* v : {"baseline", "async_tp"}) {
    const Tick bf16 = analyze(build_layer_dag(layer(true, false, "forward"), v), execute(build_layer_dag(layer(true, false, "forward"), v), h100())).makespan;
    const Dag d = build_layer_dag(layer(true, true, "forward"), v);
    CHECK(analyze(d, execute(d, h100())).makespan < bf16);
  }
}

TEST_CASE("A compiled tensor-wise cast reads its input twice, as eager: an amax kernel, then the cast", "[strategies][fp8]") {
  // Every element's cast needs the whole tensor's amax, so no kernel can do both in one read
  // (Inductor's three kernels in the measurements); compiling moves no bytes, it splits them.
  for (bool fp8_gathers : {false, true}) {
    const Dag eager = build_layer_dag(layer(true, fp8_gathers), "baseline");
    const Dag compiled = build_layer_dag(layer(true, fp8_gathers, "forward_backward", true), "baseline");
    for (const char* region : {"attention.qkv", "ffn.w13", "ffn.w2"}) {
      const std::string cast = std::string(region) + ".cast";
      CHECK(cast_read(compiled, cast + ".amax") + cast_read(compiled, cast) == Approx(cast_read(eager, cast)).epsilon(1e-12));
      CHECK(cast_read(compiled, cast + ".amax") == Approx(cast_read(compiled, cast)).epsilon(1e-12));
      CHECK(find_op(eager, cast + ".amax") == nullptr);
      // The amax comes first; a shard cast for an fp8 all-gather waits for its all-reduce between.
      CHECK(program_position(compiled, cast + ".amax") < program_position(compiled, cast));
      if (fp8_gathers && std::string(region) != "ffn.w2") {
        CHECK(program_position(compiled, cast + ".amax") < program_position(compiled, std::string(region) + ".amax_all_reduce"));
        CHECK(program_position(compiled, std::string(region) + ".amax_all_reduce") < program_position(compiled, cast));
      }
    }
    // A weight gradient's operands were cast (their amaxes found) for the forward or the input
    // gradient: compiled, they are only cast again into the GEMM's layout.
    CHECK(find_op(compiled, "ffn.w13.backward_weight.cast") != nullptr);
    CHECK(find_op(compiled, "ffn.w13.backward_weight.cast.amax") == nullptr);
    // A row-parallel output gradient finds the amaxes of dy and the weight, not of the layer's input.
    const double dy_and_weight = cast_read(compiled, "ffn.w2.backward.cast.amax");
    CHECK(dy_and_weight < cast_read(compiled, "ffn.w2.backward.cast"));
    CHECK(cast_read(eager, "ffn.w2.backward.cast") == Approx(2 * cast_read(compiled, "ffn.w2.backward.cast")).epsilon(1e-12));
  }
}

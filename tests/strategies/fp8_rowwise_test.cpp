// torchao's rowwise fp8 recipe in a TP layer (float8_linear.py, axiswise casts): every GEMM
// casts its own operands along its contraction, TP gathers bf16, GEMMs on ATen's kernel.
#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/strategies/registry.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

// Llama 3 70B under TP 8: q = 8192 / 8, one KV head of 128, FFN 28672 / 8.
constexpr double kT = 16384, kH = 8192, kQ = 1024, kKv = 128, kF = 3584, kBf16 = 2;

Scenario layer(bool rowwise, bool compile, const std::string& pass = "forward_backward") {
  Scenario s = llama3_70b_tp8_layer(pass);
  s.workload.linear_dtype = Dtype::fp8;
  s.workload.compile = compile;
  s.workload.fp8.scaling = rowwise ? Fp8Scaling::rowwise : Fp8Scaling::tensorwise;
  s.workload.tp_gathers_in_linear_dtype = !rowwise;  // torchao's float8 TP is tensorwise only
  return s;
}


const ElementwiseOp& pass_of(const Dag& dag, const std::string& name) {
  const Op* op = find_op(dag, name);
  REQUIRE(op != nullptr);
  return std::get<ElementwiseOp>(op->payload);
}

int count_containing(const Dag& dag, const std::string& part, int rank = 0) {
  int n = 0;
  for (OpId id : dag.program(rank)) n += dag.op(id).name.find(part) != std::string::npos;
  return n;
}

Tick makespan(const Scenario& s, const char* variant) {
  const Dag d = build_layer_dag(s, variant);
  return analyze(d, execute(d, h100())).makespan;
}

}  // namespace

TEST_CASE("Rowwise forward casts x and the weights along their rows: one read compiled, two eager", "[strategies][fp8]") {
  const double rows = kT * kH + (kQ + 2 * kKv) * kH;  // the gathered input, then wq, wk, wv
  for (const bool compile : {true, false}) {
    const Dag d = build_layer_dag(layer(true, compile, "forward"), "baseline");
    const ElementwiseOp& cast = pass_of(d, "attention.qkv.cast_rows");
    CHECK(cast.bytes_read == Approx((compile ? 1 : 2) * rows * kBf16).epsilon(1e-12));
    // One fp8 byte each; compiled, one fp32 scale a row of kH as well.
    CHECK(cast.bytes_written == Approx(rows + (compile ? rows / kH * 4 : 0)).epsilon(1e-12));
    // Rows of 8,192: Inductor's looped reduction, priced per element and per row.
    CHECK(cast.loop == (compile ? ElementLoop::row_reduction : ElementLoop::vectorized));
    if (compile) CHECK(cast.row == kH);
  }
  const Dag compiled = build_layer_dag(layer(true, true, "forward"), "baseline");
  CHECK(find_op(compiled, "attention.qkv.cast_columns") == nullptr);
}

TEST_CASE("Rowwise backward casts along columns read twice, and eager code lays each out again", "[strategies][fp8]") {
  // wo's output gradient dy [T, H]: along rows for the input gradient; the weight [H, Q] along its
  // columns for it; the attention output [T, Q] and dy again along their columns for the weight gradient.
  const double columns = kH * kQ + kT * kQ + kT * kH;
  for (const bool compile : {true, false}) {
    const Dag d = build_layer_dag(layer(true, compile, "backward"), "baseline");
    CHECK(pass_of(d, "attention.out.backward.cast_rows").bytes_read == Approx((compile ? 1 : 2) * kT * kH * kBf16).epsilon(1e-12));
    CHECK(pass_of(d, "attention.out.backward.cast_columns").bytes_read == Approx(2 * columns * kBf16).epsilon(1e-12));
    const Op* layout = find_op(d, "attention.out.backward.fp8_layout");
    CHECK((layout != nullptr) == !compile);
    if (layout) CHECK(std::get<ElementwiseOp>(layout->payload).bytes_read == Approx(columns).epsilon(1e-12));
    // The weight gradients of w1 and w3 cast their shared input once and each output gradient.
    CHECK(pass_of(d, "ffn.w13.backward_weight.cast_columns").bytes_read == Approx(2 * (kT * kH + 2 * kT * kF) * kBf16).epsilon(1e-12));
  }
}

TEST_CASE("Rowwise linears cast more than tensorwise ones and gather bf16: the layer is slower", "[strategies][fp8]") {
  for (const char* v : {"baseline", "async_tp"}) CHECK(makespan(layer(true, true), v) > makespan(layer(false, true), v));
}

TEST_CASE("Rowwise GEMMs run ATen's kernel unless cuBLAS is chosen", "[strategies][fp8]") {
  const auto aten_kernel = [](const Scenario& s) {
    const Dag d = build_layer_dag(s, "baseline");
    const Op* gemm = find_op(d, "attention.qkv.matmul.0");
    REQUIRE(gemm != nullptr);
    return std::get<GemmOp>(gemm->payload).problem.scaled_mm.aten_rowwise;
  };
  Scenario s = layer(true, true, "forward");
  CHECK(aten_kernel(s));
  s.workload.fp8.aten_rowwise_kernel = false;
  CHECK_FALSE(aten_kernel(s));
  CHECK_FALSE(aten_kernel(layer(false, true, "forward")));
}

TEST_CASE("Under compiled async TP, rowwise casts between the gather and the matmuls leave the all-gathers NCCL's", "[strategies][fp8]") {
  // torch/_inductor/fx_passes/micro_pipeline_tp.py _find_consumer_matmuls: only an mm or
  // _scaled_mm reading the gathered tensor fuses; the producer matmul of a reduce-scatter still does.
  const Dag rowwise = build_layer_dag(layer(true, true, "forward"), "async_tp");
  const Dag tensorwise = build_layer_dag(layer(false, true, "forward"), "async_tp");
  CHECK(count_containing(tensorwise, "attention.qkv.matmul.shard") > 0);
  CHECK(count_containing(rowwise, "attention.qkv.matmul.shard") == 0);
  CHECK(find_op(rowwise, "attention.qkv.all_gather") != nullptr);
  CHECK(count_containing(rowwise, "attention.out.matmul.chunk") > 0);
}

TEST_CASE("torchao accumulates fast in the forward GEMMs alone, under either recipe, decomposed or not", "[strategies][fp8]") {
  // Float8LinearConfig: gemm_config_output use_fast_accum=True, grad_input and grad_weight off.
  for (const bool rowwise : {false, true}) {
    for (const char* v : {"baseline", "async_tp"}) {
      const Dag d = build_layer_dag(layer(rowwise, true), v);
      int forward = 0, backward = 0;
      for (OpId id : d.program(0)) {
        const Op& op = d.op(id);
        const auto* gemm = std::get_if<GemmOp>(&op.payload);
        if (!gemm) continue;
        INFO(v << " " << op.name);
        const bool is_backward = op.name.find("backward") != std::string::npos;
        CHECK(gemm->problem.scaled_mm.fast_accumulation == !is_backward);
        // Rowwise gradients run tensor-wise with unit scales, then rescale their outputs (below).
        CHECK(gemm->problem.scaled_mm.rowwise_scales == (rowwise && !is_backward));
        (is_backward ? backward : forward) += 1;
      }
      CHECK(forward > 0);
      CHECK(backward > 0);
    }
  }
  // bf16 linears have no accumulation mode to choose.
  Scenario bf16 = layer(false, true, "forward");
  bf16.workload.linear_dtype = Dtype::bf16;
  const Dag bf16_dag = build_layer_dag(bf16, "baseline");
  const Op* gemm = find_op(bf16_dag, "attention.qkv.matmul.0");
  REQUIRE(gemm != nullptr);
  CHECK_FALSE(std::get<GemmOp>(gemm->payload).problem.scaled_mm.fast_accumulation);
}

TEST_CASE("Rowwise gradient GEMMs run cuBLAS's tensor-wise kernel, then rescale every output in one more pass", "[strategies][fp8]") {
  // torchao/float8/float8_ops.py addmm_float8_unwrapped: without fast accumulation the rowwise
  // GEMM runs with unit scales and `output *= a_inverse_scale * b_inverse_scale` follows.
  for (const bool compile : {true, false}) {
    const Dag d = build_layer_dag(layer(true, compile), "baseline");
    int rescaled = 0;
    for (OpId id : d.program(0)) {
      const Op& op = d.op(id);
      const auto* gemm = std::get_if<GemmOp>(&op.payload);
      if (!gemm) continue;
      INFO(op.name);
      const bool backward = op.name.find("backward") != std::string::npos;
      const Op* rescale = find_op(d, op.name + ".rescale");
      CHECK((rescale != nullptr) == backward);
      if (!backward) {
        CHECK(gemm->problem.scaled_mm.aten_rowwise);
        continue;
      }
      CHECK_FALSE(gemm->problem.scaled_mm.aten_rowwise);
      // The pass reads the bf16 output and writes it back: the output's bytes both ways, plus
      // the scale vectors (compiled) or the materialized fp32 product (eager).
      const double out = static_cast<double>(gemm->problem.m) * static_cast<double>(gemm->problem.n) * kBf16;
      const ElementwiseOp& pass = std::get<ElementwiseOp>(rescale->payload);
      CHECK(pass.bytes_written == Approx(out).epsilon(1e-12));
      CHECK(pass.bytes_read == Approx(compile ? out + (gemm->problem.m + gemm->problem.n) * 4.0 : 3 * out).epsilon(1e-12));
      CHECK((find_op(d, op.name + ".rescale.scales") != nullptr) == !compile);
      ++rescaled;
    }
    CHECK(rescaled > 0);
  }
  // Tensor-wise scales need no rescale.
  CHECK(count_containing(build_layer_dag(layer(false, true), "baseline"), ".rescale") == 0);
}

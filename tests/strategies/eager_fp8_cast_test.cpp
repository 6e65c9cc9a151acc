// torchao's dynamic fp8 casts as eager PyTorch runs them: every aten op its own kernel.
#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/op_checkpoint.hpp"
#include "tpsim/step/training_step.hpp"
#include "tpsim/strategies/eager_kernels.hpp"
#include "tpsim/strategies/registry.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

constexpr double kN = 16384.0 * 4096, kRows = 16384, kBf16 = 2;

double moved(const NamedKernels& ks) {
  double b = 0;
  for (const auto& [name, op] : ks) b += op.bytes_read + op.bytes_written;
  return b;
}
const ElementwiseOp* kernel(const NamedKernels& ks, const std::string& name) {
  for (const auto& [k, op] : ks)
    if (k == name) return &op;
  return nullptr;
}

Scenario layer(bool eager_aten, bool rowwise, bool fp8_gathers) {
  Scenario s = llama3_70b_tp8_layer("forward_backward");
  s.workload.linear_dtype = Dtype::fp8;
  s.workload.aten_elementwise = eager_aten;
  s.workload.fp8.scaling = rowwise ? Fp8Scaling::rowwise : Fp8Scaling::tensorwise;
  s.workload.tp_gathers_in_linear_dtype = fp8_gathers;
  return s;
}

}  // namespace

TEST_CASE("An eager fp8 cast moves about 33 bytes an element, where a fused one moves 5", "[strategies][eager][fp8]") {
  // abs 4, amax 2, x.float() 6, x * scale 8, clamp 8, to fp8 5 (measured: 0.15-0.29 TB/s of the
  // 5 bytes a cast must move, fp8_casts/ in the measurements).
  const NamedKernels tensor = aten_fp8_cast_kernels(kN, kRows, kBf16, Fp8CastAxis::tensor);
  CHECK(moved(tensor) == Approx(33 * kN).epsilon(1e-6));
  CHECK(tensor.size() == 10);  // abs, amax, four on the scale, float, mul, clamp, to fp8
  // The up-cast runs ATen's casting loop and the product with a broadcast scale its legacy loop.
  CHECK(kernel(tensor, "float")->loop == ElementLoop::cast);
  CHECK(kernel(tensor, "mul_scale")->loop == ElementLoop::strided);
  // Rowwise scales are rounded to powers of 2 (three kernels more, on the scales alone); a
  // column-scaled operand is then copied column-major, an fp8 byte each way.
  const NamedKernels rows = aten_fp8_cast_kernels(kN, kRows, kBf16, Fp8CastAxis::rows);
  const NamedKernels columns = aten_fp8_cast_kernels(kN, kRows, kBf16, Fp8CastAxis::columns);
  CHECK(rows.size() == tensor.size() + 3);
  CHECK(moved(rows) - moved(tensor) < 0.02 * kN);
  CHECK(moved(columns) - moved(rows) == Approx(2 * kN).epsilon(0.01));
  CHECK(kernel(columns, "column_major")->loop == ElementLoop::strided);
  // With the amax kept (a recompute under per-op SAC) abs and the reduction are not run again.
  const NamedKernels kept = aten_fp8_cast_kernels(kN, kRows, kBf16, Fp8CastAxis::tensor, false);
  CHECK(kernel(kept, "abs") == nullptr);
  CHECK(kernel(kept, "amax") == nullptr);
  CHECK(moved(tensor) - moved(kept) == Approx(3 * kBf16 * kN).epsilon(1e-6));
}

TEST_CASE("Eager torchtitan code casts fp8 operands op by op, and the abstract eager path stays two passes", "[strategies][eager][fp8]") {
  for (const bool rowwise : {false, true}) {
    const Dag aten = build_layer_dag(layer(true, rowwise, false), "baseline");
    const Dag fused = build_layer_dag(layer(false, rowwise, false), "baseline");
    const std::string cast = rowwise ? "attention.qkv.cast_rows" : "attention.qkv.cast";
    CHECK(find_op(aten, cast + ".mul_scale") != nullptr);
    CHECK(find_op(aten, cast) == nullptr);
    CHECK(find_op(fused, cast) != nullptr);
    CHECK(analyze(aten, execute(aten, h100())).makespan > analyze(fused, execute(fused, h100())).makespan);
  }
  // A shard cast for an fp8 all-gather waits for the amax's all-reduce between the reduction and the scale.
  const Dag gathered = build_layer_dag(layer(true, false, true), "baseline");
  CHECK(program_position(gathered, "attention.qkv.cast.amax") < program_position(gathered, "attention.qkv.amax_all_reduce"));
  CHECK(program_position(gathered, "attention.qkv.amax_all_reduce") < program_position(gathered, "attention.qkv.cast.scale.to_double"));
}

TEST_CASE("Eager torchtitan code's per-op recompute casts op by op too: fp8 saves less there than with fused casts", "[strategies][eager][fp8]") {
  const auto recompute = [](const std::string& extra) {
    const Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
        "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {{"fsdp": 8}},
                      "activation_checkpoint": "selective_op"{}}}, "variants": ["baseline"]}})", extra)), "");
    return static_cast<double>(op_checkpoint_recompute(s.workload.step, s.hardware, s.dtype, false));
  };
  // The recomputed linears' GEMMs gain the same from fp8 either way; the aten casts cost more.
  const double aten_change = recompute(R"(, "elementwise": "aten", "linear_dtype": "fp8")") - recompute(R"(, "elementwise": "aten")");
  const double fused_change = recompute(R"(, "linear_dtype": "fp8")") - recompute("");
  CHECK(aten_change > fused_change);
}

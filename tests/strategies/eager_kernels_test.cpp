#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/training_step.hpp"
#include "tpsim/strategies/eager_kernels.hpp"
#include "tpsim/strategies/registry.hpp"

using namespace tpsim;

namespace {

double moved(const NamedKernels& ks) {
  double b = 0;
  for (const auto& [name, op] : ks) b += op.bytes_read + op.bytes_written;
  return b;
}
double fp32_written(const NamedKernels& ks, double n) {
  double b = 0;
  for (const auto& [name, op] : ks) b += op.bytes_written >= 4 * n ? op.bytes_written : 0;
  return b;
}

std::string step(const std::string& extra) {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {{"fsdp": 8}},
                    "activation_checkpoint": "selective_op"{}}}, "variants": ["baseline"]}})",
                     extra.empty() ? "" : ", " + extra);
}
double step_ms(const std::string& json) {
  return static_cast<double>(run_training_step(parse_scenario(Json::parse(json), "")).runs.at(0).sim.makespan) * 1e-9;
}

}  // namespace

TEST_CASE("eager RMSNorm moves nine times a fused norm's bytes forward, more backward", "[strategies][eager]") {
  const double n = 1 << 24, rows = 4096, e = 2;
  const NamedKernels f = aten_rmsnorm_kernels(n, rows, e, false), b = aten_rmsnorm_kernels(n, rows, e, true);
  CHECK(f.size() == 8);  // float, pow, mean, + eps, rsqrt, x * rsqrt, type_as, * weight
  // 36 bytes per element (the per-row vectors aside) against a fused kernel's read + write of 2 each.
  CHECK(moved(f) / n == Approx(36).epsilon(0.01));
  CHECK(moved(f) / (2 * n * e) == Approx(9).epsilon(0.01));
  CHECK(moved(b) > 2 * moved(f));
  // Between the up-cast and the down-cast every fp32 tensor written is read again (x.float() twice).
  double read32 = 0, written32 = 0;
  for (const auto& [name, op] : f) {
    read32 += op.bytes_read >= 4 * n ? 4 * n * std::floor(op.bytes_read / (4 * n)) : 0;
    written32 += op.bytes_written >= 4 * n ? op.bytes_written : 0;
  }
  CHECK(read32 == Approx(written32 + 4 * n));
  CHECK(fp32_written(f, n) == Approx(3 * 4 * n));  // float, pow, x * rsqrt
}

TEST_CASE("eager RoPE up-casts, rotates and down-casts both ways", "[strategies][eager]") {
  const double n = 1 << 20;
  for (bool backward : {false, true}) {
    const NamedKernels k = aten_rope_kernels(n, 2, 2, backward);
    CHECK(k.size() == 3);
    CHECK(moved(k) / n == Approx(20));
    CHECK(k.front().second.bytes_read == 2 * n);
    CHECK(k.back().second.bytes_written == 2 * n);
  }
  // The table broadcasts over batch and heads: its product keeps four dimensions over several
  // sequences, three over one, eager and compiled alike.
  CHECK(aten_rope_kernels(n, 2, 2, false)[1].second.dims == 4);
  CHECK(aten_rope_kernels(n, 1, 2, false)[1].second.dims == 3);
  CHECK(compiled_rope_kernels(n, 1, 2, false)[1].second.dims == 3);
  // SwiGLU eager: silu and mul apart (10 bytes per element) where fused reads two and writes one (6).
  CHECK(moved(aten_swiglu_kernels(n, 2, false)) / n == Approx(10));
  CHECK(moved(aten_swiglu_kernels(n, 2, true)) > moved(aten_swiglu_kernels(n, 2, false)));
}

TEST_CASE("a step with eager aten kernels is slower than fused or compiled, and compile is refused with them", "[strategies][eager][step]") {
  const double fused = step_ms(step("")), aten = step_ms(step(R"("elementwise": "aten")")), compiled = step_ms(step(R"("compile": true)"));
  CHECK(aten > 1.1 * fused);  // two RMSNorms, RoPE and SwiGLU per layer, forward, recompute and backward
  CHECK(compiled < aten);  // (not against fused kernels: compiled RoPE keeps ATen's complex product, which they leave out)
  CHECK(test::scenario_error(step(R"("elementwise": "aten", "compile": true)")).find("$.workload.elementwise") != std::string::npos);
  CHECK(test::scenario_error(step(R"("elementwise": "eager")")).find("$.workload.elementwise") != std::string::npos);
}

TEST_CASE("eager PyTorch with nn.RMSNorm's fused kernel lies between op-by-op norms and fused kernels throughout", "[strategies][eager][step]") {
  const double fused = step_ms(step("")), aten = step_ms(step(R"("elementwise": "aten")"));
  const double fused_norm = step_ms(step(R"("elementwise": "aten", "norm": "fused")"));
  // RoPE and SwiGLU stay eager; only the norms (four passes of the layer's [T, h] each way,
  // a fused norm moves 4 bytes per element where the op-by-op one moves about 36) change.
  CHECK(fused < fused_norm);
  CHECK(fused_norm < aten);
  CHECK(step_ms(step(R"("elementwise": "aten", "norm": "aten")")) == aten);  // the default
  // The choice belongs to eager PyTorch: refused with fused kernels, and misspelled values named.
  CHECK(test::scenario_error(step(R"("norm": "fused")")).find("$.workload.norm") != std::string::npos);
  CHECK(test::scenario_error(step(R"("elementwise": "aten", "norm": "apex")")).find("$.workload.norm") != std::string::npos);
}

namespace {

// One llama3_8b layer on TP 2 as torchtitan's model code runs it: eager (`aten`) or compiled.
Dag layer_dag(bool aten, bool compile, const std::string& pass, const std::string& model = R"("llama3_8b")") {
  Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 2, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "model": {}, "tokens": 16384, "seq_len": 8192, "pass": "{}"}},
      "variants": ["baseline"]}})", model, pass)), "");
  s.workload.aten_elementwise = aten;
  s.workload.compile = compile;
  return build_layer_dag(s, "baseline");
}

// Rank 0's ops whose name holds `part`, in program order.
std::vector<OpId> named_on_rank0(const Dag& dag, const std::string& part) {
  std::vector<OpId> out;
  for (OpId id : dag.program(0))
    if (dag.op(id).name.find(part) != std::string::npos) out.push_back(id);
  return out;
}

}  // namespace

TEST_CASE("eager kernels say which ATen loop they run: the up-casts cast, the broadcast products strided", "[strategies][eager]") {
  const double n = 1 << 20;
  const auto loop_of = [](const NamedKernels& ks, const std::string& name) {
    for (const auto& [k, op] : ks)
      if (k == name) return op.loop;
    FAIL("no kernel " << name);
    return ElementLoop::vectorized;
  };
  const NamedKernels f = aten_rmsnorm_kernels(n, 256, 2, false), b = aten_rmsnorm_kernels(n, 256, 2, true);
  CHECK(loop_of(f, "float") == ElementLoop::cast);
  CHECK(loop_of(f, "mul_rsqrt") == ElementLoop::strided);
  CHECK(loop_of(f, "mul_weight") == ElementLoop::strided);
  CHECK(loop_of(f, "type_as") == ElementLoop::vectorized);  // the down-cast to bf16 has a vectorized kernel of its own
  CHECK(loop_of(b, "type_as.grad") == ElementLoop::cast);
  CHECK(loop_of(b, "mean.grad") == ElementLoop::strided);
  for (const auto& [k, op] : f)
    if (op.loop != ElementLoop::vectorized) CHECK(op.elements == n);
  // The complex product: one element per pair of values.
  const NamedKernels rope = aten_rope_kernels(n, 2, 2, false);
  CHECK(rope[1].second.loop == ElementLoop::strided);
  CHECK(rope[1].second.elements == n / 2);
  // fp32 activations need no up- or down-cast: those kernels are not launched.
  CHECK(aten_rmsnorm_kernels(n, 256, 4, false).size() == 6);
  CHECK(aten_rope_kernels(n, 2, 4, true).size() == 1);
  // On a layer's tokens (8192 x 4096 here) the instruction-bound loops make an eager norm's
  // kernels slower than the same bytes streamed would be.
  HardwareSpec unrated = test::h100();
  unrated.elementwise.cast_sm_elements_per_ps = unrated.elementwise.strided_sm_operands_per_ps = 0;
  unrated.elementwise.strided_wide_sm_operands_per_ps = 0;
  double rated_us = 0, unrated_us = 0;
  for (const auto& [k, op] : aten_rmsnorm_kernels(8192.0 * 4096, 8192, 2, false))
    rated_us += test::kernel_alone_us(op), unrated_us += test::kernel_alone_us(op, unrated);
  CHECK(rated_us > 1.15 * unrated_us);
}

TEST_CASE("torchtitan's repeat_kv copies K and V out to the query heads, and backward sums them back", "[strategies][eager]") {
  // llama3_8b on TP 2: 16 query heads over 4 KV heads a rank.
  for (bool aten : {true, false}) {
    const Dag fwd = layer_dag(aten, !aten, "forward"), bwd = layer_dag(aten, !aten, "backward");
    const auto copies = named_on_rank0(fwd, "attention.repeat_kv.");
    REQUIRE(copies.size() == 2);
    const auto& k = std::get<ElementwiseOp>(fwd.op(copies[0]).payload);
    CHECK(k.bytes_written == Approx(4 * k.bytes_read));  // to 4x the heads
    CHECK(k.loop == (aten ? ElementLoop::strided : ElementLoop::vectorized));
    if (aten) CHECK(k.dims == 3);  // [tokens x kv heads, repeats, head_dim]: the repeats' stride 0 keeps three
    const auto sums = named_on_rank0(bwd, "attention.repeat_kv.backward.");
    REQUIRE(sums.size() == 2);
    if (aten) {
      const auto& r = std::get<ReduceOp>(bwd.op(sums[0]).payload);
      CHECK(r.inputs == 4);
      CHECK(r.out_bytes == Approx(k.bytes_read));
    } else {
      CHECK(std::get<ElementwiseOp>(bwd.op(sums[0]).payload).bytes_read == Approx(k.bytes_written));
    }
    // Copies before the attention kernel, sums after its backward.
    CHECK(copies[1] < named_on_rank0(fwd, "attention.core").front());
    CHECK(sums[0] > named_on_rank0(bwd, "attention.core.backward").back());
  }
  // None with as many KV heads as query heads, nor with fused kernels.
  CHECK(named_on_rank0(layer_dag(true, false, "forward", R"({"hidden": 4096, "ffn_hidden": 14336, "heads": 32, "kv_heads": 32, "head_dim": 128})"),
                       "repeat_kv").empty());
  CHECK(named_on_rank0(layer_dag(false, false, "forward"), "repeat_kv").empty());
}

TEST_CASE("compiled RoPE keeps ATen's complex product between two generated casts, and eager backward adds the residual's gradient",
          "[strategies][eager]") {
  const Dag compiled = layer_dag(false, true, "forward");
  const auto rope = named_on_rank0(compiled, "attention.rope.q.");
  REQUIRE(rope.size() == 3);
  CHECK(std::get<ElementwiseOp>(compiled.op(rope[0]).payload).loop == ElementLoop::vectorized);
  CHECK(std::get<ElementwiseOp>(compiled.op(rope[1]).payload).loop == ElementLoop::strided);
  CHECK(std::get<ElementwiseOp>(compiled.op(rope[2]).payload).loop == ElementLoop::vectorized);
  CHECK(named_on_rank0(layer_dag(false, false, "forward"), "attention.rope").empty());
  // Eager autograd sums the norm path's input gradient with the residual path's, once per norm.
  CHECK(named_on_rank0(layer_dag(true, false, "backward"), "add_residual_grad").size() == 2);
  CHECK(named_on_rank0(layer_dag(false, true, "backward"), "add_residual_grad").empty());
}

TEST_CASE("eager MLA normalizes each latent op by op, or in one pass with the fused norm", "[strategies][eager][mla]") {
  const std::string mla = R"({"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 16, "head_dim": 192,
      "q_lora_rank": 1536, "kv_lora_rank": 512, "rope_head_dim": 64, "v_head_dim": 128})";
  const Dag aten = layer_dag(true, false, "forward", mla);
  // q_norm and kv_norm: each latent's own RMSNorm, every aten op of it a kernel.
  const std::size_t per_norm = aten_rmsnorm_kernels(1, 1, 2, false).size();
  CHECK(named_on_rank0(aten, "attention.latent_norms.q.").size() == per_norm);
  CHECK(named_on_rank0(aten, "attention.latent_norms.kv.").size() == per_norm);
  Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 2, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "model": {}, "tokens": 16384, "seq_len": 8192, "pass": "forward"}},
      "variants": ["baseline"]}})", mla)), "");
  s.workload.aten_elementwise = true;
  s.workload.fused_norm = true;
  const Dag fused = build_layer_dag(s, "baseline");
  CHECK(named_on_rank0(fused, "attention.latent_norms").size() == 1);
  CHECK(named_on_rank0(fused, "attention.norm").size() == 1);
  // Eager MLA joins each head's query and key parts with torch.cat; fused kernels do not.
  CHECK(named_on_rank0(aten, "attention.cat.").size() == 2);
  CHECK(named_on_rank0(layer_dag(false, false, "forward", mla), "attention.cat.").empty());
}

TEST_CASE("eager MLA's cats write every head's whole query and key, and backward splits the key-value gradient too", "[strategies][eager][mla]") {
  const double t = 4096, heads = 16, qk = 192, rope = 64, v = 128, e = 2;
  const NamedKernels f = mla_cat_kernels(t, heads, qk, rope, v, e, false), b = mla_cat_kernels(t, heads, qk, rope, v, e, true);
  double written = 0;
  for (const auto& [name, op] : f) written += op.bytes_written;
  CHECK(written == Approx(2 * t * heads * qk * e));
  // The key reads its shared rotary part once, not once per head.
  CHECK(f[1].second.bytes_read == Approx((t * heads * (qk - rope) + t * rope) * e));
  // Per element, offsets computed: ATen's general cat kernel, forward and backward.
  for (const auto& [name, op] : f) CHECK(op.loop == ElementLoop::cat);
  CHECK(b[0].second.loop == ElementLoop::cat);
  // Backward also sums the expanded rotary key over the heads, and joins the keys' and values' gradients.
  CHECK(moved(b) > moved(f));
}

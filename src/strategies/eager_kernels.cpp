#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim {

namespace {

constexpr double kFp32 = 4;
// RoPE's table broadcasts over the batch and the heads: [batch, tokens, heads, pairs] keeps its
// four dimensions in the legacy loop's offset calculator, three for one sequence.
int rope_table_dims(double sequences) { return sequences > 1 ? 4 : 3; }

// x.float() and type_as are no kernels where x is fp32 already.
ElementwiseOp up_to_fp32(double n, double e) { return e == kFp32 ? ElementwiseOp{} : aten_convert(n, e, kFp32); }
ElementwiseOp down_from_fp32(double n, double e) { return e == kFp32 ? ElementwiseOp{} : aten_convert(n, kFp32, e); }

}  // namespace

// Which loop ATen runs (CUDALoops.cuh): a product with a per-row or per-column operand, or an
// expanded input, takes the legacy loop (`strided`); dtype conversions as aten_convert says.
// Seen in a profile of torchtitan's layer: every `cast` and `strided` kernel ran at nearly the
// same speed on an H100 and an H200, the vectorized ones 1.4x faster on the H200, as its HBM is.
ElementwiseOp aten_kernel(ElementLoop loop, double read, double written, double elements) { return {read, written, elements, loop}; }
ElementwiseOp aten_strided(double read, double written, double elements, int operands, int dims) {
  ElementwiseOp op = aten_kernel(ElementLoop::strided, read, written, elements);
  op.operands = operands;
  op.dims = dims;
  return op;
}

NamedKernels without_empty_kernels(NamedKernels k) {
  std::erase_if(k, [](const auto& named) { return named.second.bytes_read + named.second.bytes_written <= 0; });
  return k;
}

ElementwiseOp aten_convert(double elems, double from_bytes, double to_bytes) {
  if (to_bytes > from_bytes) return {elems * from_bytes, elems * to_bytes, elems, ElementLoop::cast};
  return {elems * from_bytes, elems * to_bytes};
}

NamedKernels aten_rmsnorm_kernels(double n, double rows, double e, bool backward) {
  const double r = rows * kFp32;  // a per-row fp32 vector
  const ElementwiseOp up = up_to_fp32(n, e), down = down_from_fp32(n, e);
  if (!backward)
    return without_empty_kernels({{"float", up},                       {"pow", {n * kFp32, n * kFp32}}, {"mean", {n * kFp32, r}},
            {"add_eps", {r, r}},                 {"rsqrt", {r, r}},               {"mul_rsqrt", aten_strided(n * kFp32 + r, n * kFp32, n, 3)},
            {"type_as", down},                   {"mul_weight", aten_strided(n * e, n * e, n, 3)}});
  return without_empty_kernels({{"mul_weight.grad_input", aten_strided(n * e, n * e, n, 3)}, {"mul_weight.grad_weight", {2 * n * e, n * e}},
          {"mul_weight.grad_weight_sum", {n * e, 0}},         {"type_as.grad", up},
          {"mul_rsqrt.grad_x", aten_strided(n * kFp32 + r, n * kFp32, n, 3)}, {"mul_rsqrt.grad_rsqrt", {2 * n * kFp32, n * kFp32}},
          {"mul_rsqrt.grad_rsqrt_sum", {n * kFp32, r}},       {"rsqrt.grad", {2 * r, r}},
          {"mean.grad", aten_strided(r, n * kFp32, n, 2)},            {"pow.self_pow_1", {n * kFp32, n * kFp32}},
          {"pow.times_exponent", {n * kFp32, n * kFp32}},     {"pow.grad", {2 * n * kFp32, n * kFp32}},
          {"grad_x.sum_paths", {2 * n * kFp32, n * kFp32}},   {"float.grad", down}});
}

NamedKernels aten_rope_kernels(double n, double sequences, double e, bool backward) {
  // The rotation table (sequence x head_dim/2 complex) is small beside Q and K; it is
  // broadcast over the batch and heads, so the complex product takes the strided loop, one
  // complex element per pair of values.
  const ElementwiseOp up = up_to_fp32(n, e), down = down_from_fp32(n, e);
  const ElementwiseOp product = aten_strided(n * kFp32, n * kFp32, n / 2, 3, rope_table_dims(sequences));
  if (!backward) return without_empty_kernels({{"float", up}, {"complex_mul", product}, {"type_as", down}});
  return without_empty_kernels({{"type_as.grad", up}, {"complex_mul.grad", product}, {"float.grad", down}});
}

ElementwiseOp compiled_row_cast(double elems, double row, double from_bytes, double to_bytes) {
  // torch/_inductor/choices.py, should_use_persistent_reduction: ReductionHint.INNER's threshold.
  // The looped kernel's second read of a row finds it in L2 (its first loads evict_last): HBM
  // sees the input once either way.
  constexpr double kPersistentRow = 1024;
  ElementwiseOp op{elems * from_bytes, elems * to_bytes + (row > 0 ? elems / row * kFp32 : 0)};
  if (row > kPersistentRow) {
    op.elements = elems;
    op.loop = ElementLoop::row_reduction;
    op.row = row;
  }
  return op;
}

NamedKernels aten_fp8_cast_kernels(double n, double rows, double e, Fp8CastAxis axis, bool with_amax) {
  constexpr double kFp8 = 1;
  const double scales = (axis == Fp8CastAxis::tensor ? 1 : axis == Fp8CastAxis::rows ? rows : n / rows) * kFp32;
  NamedKernels k;
  if (with_amax) k.insert(k.end(), {{"abs", {n * e, n * e}}, {"amax", {n * e, scales}}});
  for (const char* scale_op : {"scale.to_double", "scale.clamp", "scale.div", "scale.to_float"}) k.push_back({scale_op, {scales, scales}});
  if (axis != Fp8CastAxis::tensor)
    for (const char* round : {"scale.log2", "scale.floor", "scale.exp2"}) k.push_back({round, {scales, scales}});
  k.insert(k.end(), {{"float", aten_convert(n, e, kFp32)},
                     {"mul_scale", aten_strided(n * kFp32 + scales, n * kFp32, n, 3)},
                     {"clamp", {n * kFp32, n * kFp32}},
                     {"to_fp8", {n * kFp32, n * kFp8}}});
  if (axis == Fp8CastAxis::columns) k.push_back({"column_major", aten_strided(n * kFp8, n * kFp8, n, 2)});
  return k;
}

NamedKernels rowwise_output_rescale(double m, double n, double e, bool compiled) {
  const double out = m * n, scales = (m + n) * kFp32;
  if (compiled) return {{"rescale", {out * e + scales, out * e}}};
  return {{"rescale.scales", aten_strided(scales, out * kFp32, out, 3)}, {"rescale", aten_kernel(ElementLoop::cast, out * (e + kFp32), out * e, out)}};
}

NamedKernels compiled_rope_kernels(double n, double sequences, double e, bool backward) {
  // Inductor generates no code for complex operators (torch/_inductor/lowering.py falls back to
  // ATen for them): the complex product stays ATen's strided kernel between two generated
  // casts; each way the same three kernels.
  (void)backward;
  return {{"to_float", {n * e, n * kFp32}},
          {"complex_mul", aten_strided(n * kFp32, n * kFp32, n / 2, 3, rope_table_dims(sequences))},
          {"to_dtype", {n * kFp32, n * e}}};
}

NamedKernels repeat_kv_kernels(double kv_elems, double q_elems, double e, bool aten) {
  // expand + reshape materializes each of K and V at the query heads' width: ATen's strided
  // copy over [tokens x kv heads, repeats, head_dim] (the repeats' stride 0 keeps three
  // dimensions), or one generated (vectorized) copy under torch.compile.
  const ElementwiseOp copy = aten ? aten_strided(kv_elems * e, q_elems * e, q_elems, 2, 3) : ElementwiseOp{kv_elems * e, q_elems * e};
  return {{"k", copy}, {"v", copy}};
}

NamedKernels mla_cat_kernels(double t, double heads, double qk, double r, double v, double e, bool backward) {
  const double joined = t * heads * qk;  // [T, heads, qk_head_dim]
  const auto cat = [](double read, double written, double elements) { return aten_kernel(ElementLoop::cat, read, written, elements); };
  if (!backward) return {{"q", cat(joined * e, joined * e, joined)}, {"k", cat((t * heads * (qk - r) + t * r) * e, joined * e, joined)}};
  // The cats' gradients are narrowed views of the incoming gradient, so split's gradient cats
  // views again.
  const double kv = t * heads * (qk - r + v);
  return {{"q.split", cat(joined * e, joined * e, joined)},
          {"k.rope_expand_sum", {t * heads * r * e, t * r * e}},
          {"kv.split", cat(kv * e, kv * e, kv)}};
}

NamedKernels aten_swiglu_kernels(double n, double e, bool backward) {
  if (!backward) return {{"silu", {n * e, n * e}}, {"mul", {2 * n * e, n * e}}};
  // mul saved both inputs (SiLU's output and w3's); silu_backward reads w1's output.
  return {{"mul.grad_w3", {2 * n * e, n * e}}, {"mul.grad_silu", {2 * n * e, n * e}}, {"silu_backward", {2 * n * e, n * e}}};
}

}  // namespace tpsim

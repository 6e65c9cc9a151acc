#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim {

namespace {

constexpr double kFp32 = 4;

}  // namespace

NamedKernels aten_rmsnorm_kernels(double n, double rows, double e, bool backward) {
  const double r = rows * kFp32;  // a per-row fp32 vector
  if (!backward)
    return {{"float", {n * e, n * kFp32}},       {"pow", {n * kFp32, n * kFp32}}, {"mean", {n * kFp32, r}},
            {"add_eps", {r, r}},                 {"rsqrt", {r, r}},               {"mul_rsqrt", {n * kFp32 + r, n * kFp32}},
            {"type_as", {n * kFp32, n * e}},     {"mul_weight", {n * e, n * e}}};
  return {{"mul_weight.grad_input", {n * e, n * e}},          {"mul_weight.grad_weight", {2 * n * e, n * e}},
          {"mul_weight.grad_weight_sum", {n * e, 0}},         {"type_as.grad", {n * e, n * kFp32}},
          {"mul_rsqrt.grad_x", {n * kFp32 + r, n * kFp32}},   {"mul_rsqrt.grad_rsqrt", {2 * n * kFp32, n * kFp32}},
          {"mul_rsqrt.grad_rsqrt_sum", {n * kFp32, r}},       {"rsqrt.grad", {2 * r, r}},
          {"mean.grad", {r, n * kFp32}},                      {"pow.self_pow_1", {n * kFp32, n * kFp32}},
          {"pow.times_exponent", {n * kFp32, n * kFp32}},     {"pow.grad", {2 * n * kFp32, n * kFp32}},
          {"grad_x.sum_paths", {2 * n * kFp32, n * kFp32}},   {"float.grad", {n * kFp32, n * e}}};
}

NamedKernels aten_rope_kernels(double n, double e, bool backward) {
  // The rotation table (sequence x head_dim/2 complex) is small beside Q and K.
  if (!backward) return {{"float", {n * e, n * kFp32}}, {"complex_mul", {n * kFp32, n * kFp32}}, {"type_as", {n * kFp32, n * e}}};
  return {{"type_as.grad", {n * e, n * kFp32}}, {"complex_mul.grad", {n * kFp32, n * kFp32}}, {"float.grad", {n * kFp32, n * e}}};
}

NamedKernels aten_swiglu_kernels(double n, double e, bool backward) {
  if (!backward) return {{"silu", {n * e, n * e}}, {"mul", {2 * n * e, n * e}}};
  // mul saved both inputs (SiLU's output and w3's); silu_backward reads w1's output.
  return {{"mul.grad_w3", {2 * n * e, n * e}}, {"mul.grad_silu", {2 * n * e, n * e}}, {"silu_backward", {2 * n * e, n * e}}};
}

}  // namespace tpsim

#pragma once
// A Llama layer's element-wise parts as eager PyTorch runs torchtitan's model code
// (`"elementwise": "aten"`; torchtitan 9dec370 models/norms.py RMSNorm and
// models/llama/model.py apply_rotary_emb, FeedForward): every aten op its own kernel, in the
// dtypes the code asks for. Backward is autograd's formula for each op
// (tools/autograd/derivatives.yaml). `e`: the activation dtype's bytes.
//   RMSNorm forward: x.float(), pow(2), mean(-1), + eps, rsqrt, x * rsqrt, type_as(x),
//     * weight: about 36 bytes per element at bf16 where a fused kernel moves 4.
//   RMSNorm backward: mul's two gradients (the weight's summed over tokens), the fp32
//     up-cast of the gradient, x * rsqrt's two gradients (one summed per row), rsqrt's and
//     mean's (the expand materialized), pow's (self.pow(1), times 2, times the gradient),
//     the two paths' sum, the down-cast.
//   RoPE, each of Q and K: float(), the complex multiply, type_as; backward the same three.
//   SiLU * w3: silu, mul; backward mul's two gradients and silu_backward.
// Each kernel says which of ATen's loops it runs (ElementLoop): the up-casts and the products
// with a broadcast operand are bound by instructions per element, not by HBM.
#include <string>
#include <utility>
#include <vector>

#include "tpsim/dag/op.hpp"

namespace tpsim {

using NamedKernels = std::vector<std::pair<std::string, ElementwiseOp>>;

// A kernel in one of ATen's loops that is bound by instructions per output element.
ElementwiseOp aten_kernel(ElementLoop loop, double read, double written, double elements);
// ATen's legacy (strided) loop over `operands` tensors (the output and each strided input), with
// `dims` dimensions left after TensorIterator merges what it can.
ElementwiseOp aten_strided(double read, double written, double elements, int operands, int dims = 2);
// Drops the kernels that move nothing (x.float() of an fp32 tensor is no kernel).
NamedKernels without_empty_kernels(NamedKernels k);

// ATen's copy of `elems` elements from a dtype of `from_bytes` to one of `to_bytes`: an up-cast
// runs the unrolled loop with dynamic casting (ElementLoop::cast, priced per element); a
// down-cast to a 16-bit dtype has its own vectorized kernel (Copy.cu), as a same-dtype copy.
ElementwiseOp aten_convert(double elems, double from_bytes, double to_bytes);

// A compiled rowwise fp8 cast of `elems` elements along rows of `row` (torchao's axiswise
// scaling: each row's amax, a scale, the saturated cast) from `from_bytes` to `to_bytes`, one
// Inductor reduction kernel: persistent (a row in registers, streaming at HBM's rate) up to
// Inductor's threshold for inner reductions, 1,024 elements; looped beyond it, bound by the
// SM's instructions per element and per row (ElementLoop::row_reduction). Its scales are fp32.
ElementwiseOp compiled_row_cast(double elems, double row, double from_bytes, double to_bytes);

// The axis torchao's dynamic fp8 cast scales along: one scale for the whole tensor, one per row,
// or one per column (the operand then copied column-major for _scaled_mm).
enum class Fp8CastAxis { tensor, rows, columns };
// torchao's dynamic fp8 cast of `elems` elements in `rows` rows as eager PyTorch runs it
// (torchao/float8/float8_utils.py tensor_to_amax and amax_to_scale, float8_scaling_utils.py
// hp_tensor_and_scale_to_float8 and to_fp8_saturated), each aten op its own kernel: abs, the amax
// reduction, the scale's tiny kernels (to float64, clamp, finfo.max / amax, to float32; rowwise
// scales also rounded down to a power of 2: log2, floor, exp2), x.float(), x * scale (a broadcast
// scale: the legacy loop), clamp, the narrowing copy to fp8, and for a column-scaled operand
// `.t().contiguous().t()` (a transposing strided copy). Measured: 9 to 13 kernels moving about
// 33 bytes an element, 0.15-0.29 TB/s of what a cast must move (fp8_casts/ in the measurements).
// `with_amax` false: the amax is kept (per-op SAC saves aten.max), so a recompute starts at the scale.
NamedKernels aten_fp8_cast_kernels(double elems, double rows, double e, Fp8CastAxis axis, bool with_amax = true);

// torchao's rescale of an [m, n] output of a rowwise fp8 GEMM run with unit scales
// (Fp8Recipe::rescales_output): `output *= a_inverse_scale * b_inverse_scale`, [m, 1] times
// [1, n] fp32. Compiled, one generated kernel reads the output and both scale vectors and writes
// the output; eager, the outer product is materialized in fp32 (a broadcast, the legacy loop),
// then multiplied into the `e`-byte output (mixed dtypes: the casting loop).
NamedKernels rowwise_output_rescale(double m, double n, double e, bool compiled);

// `elems`: the normalized tensor's elements; `rows`: its rows (tokens).
NamedKernels aten_rmsnorm_kernels(double elems, double rows, double e, bool backward);
// `elems`: the elements of Q, or of K (one rank's heads), over `sequences` sequences; each is
// rotated apart.
NamedKernels aten_rope_kernels(double elems, double sequences, double e, bool backward);
// `elems`: one up-projection's output elements (w1's, as w3's).
NamedKernels aten_swiglu_kernels(double elems, double e, bool backward);
// RoPE under torch.compile (torchtitan compiles each block): generated casts around ATen's
// complex product, forward and backward alike.
NamedKernels compiled_rope_kernels(double elems, double sequences, double e, bool backward);
// torchtitan's MLA (deepseek_v3/model.py, 0cfbd0b) joins each head's query and key from split
// views with torch.cat (the query: its no-position and rotated parts; the key: wkv_b's part and
// the one rotary key expanded over the heads): ATen's general cat kernel on strided inputs, an
// offset per element. Backward, each split's gradient is a cat again (the query's; the keys'
// and values' of wkv_b's output), and the expanded rotary key's gradient is summed over the
// heads. SDPA takes the transposed views as they are. Per rank: `tokens`, `heads`.
NamedKernels mla_cat_kernels(double tokens, double heads, double qk_head_dim, double rope_dim, double v_head_dim, double e,
                             bool backward);
// torchtitan's repeat_kv before attention with fewer KV heads than query heads: K and V each
// copied out to `q_elems` (eager: ATen's strided copy; compiled: a generated one). Backward
// sums the copies back (a reduction: the caller's).
NamedKernels repeat_kv_kernels(double kv_elems, double q_elems, double e, bool aten);

}  // namespace tpsim

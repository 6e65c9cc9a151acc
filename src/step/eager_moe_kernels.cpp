#include "tpsim/step/eager_moe_kernels.hpp"

#include <cmath>

namespace tpsim {

namespace {

constexpr double kFp32 = 4, kIndex = 8;  // fp32 scores; int64 indices
constexpr double kAlignRows = 8;         // TOKEN_GROUP_ALIGN_SIZE_M (bf16)
// torch.argsort of int64 keys: CUB's onesweep radix sort, 8 bits a pass over all 64 bits
// (no key range is known), each pass reading and writing keys and values.
constexpr int kRadixPasses = 8;

// A row gather with vectorized loads (vectorized_gather_kernel): `rows` rows read by index.
ElementwiseOp row_gather(double rows, double row_bytes) { return {rows * (row_bytes + kIndex), rows * row_bytes}; }
// ATen's index_put_ (index_elementwise_kernel) and scatter_add_ (_scatter_gather_elementwise_
// kernel, an atomic add per element) of `rows` rows: an offset computed per element.
ElementwiseOp row_index_put(double rows, double row_bytes, double row_elems) {
  return aten_kernel(ElementLoop::index, rows * (row_bytes + kIndex), rows * row_bytes, rows * row_elems);
}
ElementwiseOp row_scatter_add(double rows, double row_bytes, double row_elems) {
  return aten_kernel(ElementLoop::scatter, rows * (row_bytes + kIndex), rows * row_bytes, rows * row_elems);
}
// `elems` written as zeros (zeros_like / new_zeros: a fill kernel).
ElementwiseOp zeros(double elems, double e) { return {0, elems * e}; }

}  // namespace

double EagerMoeShape::padded() const {
  return std::ceil((computed + local_experts * kAlignRows) / kAlignRows) * kAlignRows;
}

NamedKernels eager_moe_route_kernels(const EagerMoeShape& s, bool backward) {
  const double scores = s.tokens * s.experts, picked = s.slots, row = s.hidden * s.e;
  if (!backward) {
    NamedKernels k = {
        {"router.scores_float", aten_convert(scores, s.e, kFp32)},
        {"router.softmax", {scores * kFp32, scores * kFp32}},
        {"router.add_expert_bias", aten_strided(scores * kFp32 + s.experts * kFp32, scores * kFp32, scores, 3)},
        {"router.topk", {scores * kFp32, picked * (kFp32 + kIndex)}},
        {"router.gather_scores", {picked * (kIndex + kFp32), picked * kFp32}},
        {"router.route_scale", {picked * kFp32, picked * kFp32}},
        {"router.histc", {picked * kIndex, s.experts * kFp32}},
        {"router.tokens_per_expert_add", {2 * s.experts * kFp32, s.experts * kFp32}},
        {"reorder.histc", {picked * kIndex, s.experts * kFp32}},
    };
    for (int i = 0; i < kRadixPasses; ++i) k.push_back({"reorder.argsort", {picked * 2 * kIndex, picked * 2 * kIndex}});
    k.push_back({"reorder.scores_by_slot", {picked * (kIndex + kFp32), picked * kFp32}});
    k.push_back({"reorder.token_of_slot", {picked * kIndex, picked * kIndex}});
    k.push_back({"slots.gather", row_gather(s.slots, row)});
    return without_empty_kernels(std::move(k));
  }
  // gather's gradient: scatter_add into zeros (one atomicAdd per element); the scores'
  // gradients back through the index, the scale, the gather, softmax and the up-cast.
  return without_empty_kernels({
      {"slots.gather.backward.zeros", zeros(s.tokens * s.hidden, s.e)},
      {"slots.gather.backward.scatter_add", row_scatter_add(s.slots, row, s.hidden)},
      {"reorder.scores_by_slot.backward.zeros", zeros(picked, kFp32)},
      {"reorder.scores_by_slot.backward.index_put", {picked * (kIndex + 2 * kFp32), picked * kFp32}},
      {"router.route_scale.backward", {picked * kFp32, picked * kFp32}},
      {"router.gather_scores.backward.zeros", zeros(scores, kFp32)},
      {"router.gather_scores.backward.scatter_add", row_scatter_add(picked, kFp32, 1)},
      {"router.softmax.backward", {2 * scores * kFp32, scores * kFp32}},
      {"router.scores_float.backward", aten_convert(scores, kFp32, s.e)},
  });
}

NamedKernels eager_moe_permute_kernels(const EagerMoeShape& s, bool backward) {
  const double row = s.hidden * s.e, rows = s.computed, padded = s.padded();
  if (!backward)
    return {{"ep.vstack", {(rows + 1) * row, (rows + 1) * row}}, {"ep.index", row_gather(padded, row)}};
  // index's gradient: zeros, then index_put_ with accumulate (a sort of the indices, then
  // each row added in); vstack's is views of it.
  NamedKernels k = {{"ep.index.backward.zeros", zeros((rows + 1) * s.hidden, s.e)}};
  for (int i = 0; i < kRadixPasses; ++i) k.push_back({"ep.index.backward.sort", {padded * 2 * kIndex, padded * 2 * kIndex}});
  k.push_back({"ep.index.backward.index_put", {padded * (2 * row + kIndex), padded * row}});
  return k;
}

NamedKernels eager_moe_unpermute_kernels(const EagerMoeShape& s, bool backward) {
  const double row = s.hidden * s.e, rows = s.computed, padded = s.padded();
  if (!backward) return {{"ep.index_put", row_index_put(padded, row, s.hidden)}};
  // out_unpermuted[:-1]'s gradient (zeros and a copy into the slice), then index_put_'s
  // gradient for the values: an index, a row gather.
  return {{"ep.slice.backward.zeros", zeros((rows + 1) * s.hidden, s.e)},
          {"ep.slice.backward.copy", {rows * row, rows * row}},
          {"ep.index_put.backward", row_gather(padded, row)}};
}

NamedKernels eager_moe_combine_kernels(const EagerMoeShape& s, bool backward) {
  const double n = s.slots * s.hidden, row = s.hidden * s.e, scores = s.slots * kFp32;
  const ElementwiseOp up = aten_convert(n, s.e, kFp32), down = aten_convert(n, kFp32, s.e);
  if (!backward)
    return without_empty_kernels({
        {"combine.to_float", up},
        {"combine.scale", aten_strided(n * kFp32 + scores, n * kFp32, n, 3)},
        {"combine.to_dtype", down},
        {"combine.clone", {s.tokens * row, s.tokens * row}},
        {"combine.scatter_add", row_scatter_add(s.slots, row, s.hidden)},
    });
  // scatter_add's gradient for the source: a gather (vectorized); the casts' and the
  // product's (the scores' summed over the hidden dim).
  return without_empty_kernels({
      {"combine.scatter_add.backward", row_gather(s.slots, row)},
      {"combine.to_dtype.backward", up},
      {"combine.scale.grad_input", aten_strided(n * kFp32 + scores, n * kFp32, n, 3)},
      {"combine.scale.grad_scores.mul", {2 * n * kFp32, n * kFp32}},
      {"combine.scale.grad_scores.sum", {n * kFp32, scores}},
      {"combine.to_float.backward", down},
  });
}

}  // namespace tpsim

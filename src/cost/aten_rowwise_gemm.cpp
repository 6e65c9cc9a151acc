#include "tpsim/cost/aten_rowwise_gemm.hpp"

#include "tpsim/core/integer_division.hpp"

namespace tpsim {

namespace {

struct ClusterAndSide {
  GemmProblem::Cluster cluster;
  bool transposed;
};

// The cluster and orientation, from the output's sides rounded up to 64 (every tile is a
// multiple of 64). Clusters are given as the source writes them: (2, 1) or (1, 2).
ClusterAndSide cluster_and_side(std::int64_t m, std::int64_t n) {
  const GemmProblem::Cluster rows{2, 1}, columns{1, 2};
  m = round_up(m, 64), n = round_up(n, 64);
  // Small or skinny outputs whose side is an odd multiple of 64.
  if (m == 64 && n >= 3072) return {columns, false};
  if (n == 64 && m >= 3072) return {columns, true};
  if (m == 192 && n >= 4096) return {columns, true};
  if (n == 192 && m >= 4096) return {columns, false};
  // Odd multiples of 128, unless large.
  if (m * n <= 4096 * 4096) {
    if (m % 256 > 0 && n % 256 == 0) return {rows, true};
    if (n % 256 > 0 && m % 256 == 0) return {rows, false};
  }
  if (m % 256 > 0 && n % 256 > 0) return {rows, (m <= n) != (m * n <= 1024 * 1024)};
  if (m >= 4096 && n >= 4096) return {rows, m < n};
  if ((m <= n) != (m >= 2048 && n >= 2048)) return {columns, true};
  return {rows, true};
}

}  // namespace

AtenRowwiseChoice aten_rowwise_choice(std::int64_t m, std::int64_t n, int sms) {
  const ClusterAndSide c = cluster_and_side(m, n);
  AtenRowwiseChoice out;
  out.transposed = c.transposed;
  out.cluster = c.cluster;
  out.kernel_m = c.transposed ? n : m;
  out.kernel_n = c.transposed ? m : n;
  // "We prefer to use smaller tiles (less wasted compute in case of padding), but if this
  // causes us to have more CUDA blocks than there are SMs on the GPU then we'll hit wave
  // quantization": the 64 x 128 tile's clusters against the clusters the SMs hold.
  const std::int64_t clusters = ceil_div(out.kernel_m, 64 * c.cluster.m) * ceil_div(out.kernel_n, 128 * c.cluster.n);
  out.small_tile = clusters <= sms / c.cluster.ctas();
  return out;
}

}  // namespace tpsim

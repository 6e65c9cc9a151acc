#pragma once
// How ATen runs torch._scaled_mm with rowwise scales on its own CUTLASS kernel
// (aten/src/ATen/native/cuda/RowwiseScaledMM.cu, read at pytorch/pytorch 01386a0:
// dispatch_fp8_rowwise_kernel_on_cluster_size_and_transpose, then
// dispatch_fp8_rowwise_kernel_on_tile_size): a heuristic on the output's shape picks a
// cluster of two CTAs along one side and whether to compute the transposed product; the tile
// is then the small one while its grid fits one wave of clusters, else the large one.
#include <cstdint>

#include "tpsim/cost/gemm_cost.hpp"

namespace tpsim {

struct AtenRowwiseChoice {
  // The kernel computes C^T = B^T A^T: its rows are the problem's columns.
  bool transposed = false;
  GemmProblem::Cluster cluster{};  // in the kernel's frame (rows x columns of its output)
  bool small_tile = false;
  std::int64_t kernel_m = 0, kernel_n = 0;  // the output the kernel tiles
};

// `m` x `n`: the product's output; `sms`: the SMs the kernel may use.
AtenRowwiseChoice aten_rowwise_choice(std::int64_t m, std::int64_t n, int sms);

}  // namespace tpsim

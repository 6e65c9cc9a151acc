#pragma once
// GEMM cost: how cuBLAS/CUTLASS-style kernels on Hopper cut C[m,n] = A[m,k] B[k,n]
// into thread blocks, and how long one block takes. Waves are NOT computed here:
// they emerge when the block scheduler places these blocks on free SMs.
#include <cstdint>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/hw/hbm_pool.hpp"

namespace tpsim {

// `batch` independent products of the same shape in one launch (a strided batched
// GEMM: cuBLAS puts the batch index in the grid, so the tiles of every product
// share the SMs).
struct GemmProblem {
  std::int64_t m = 0, n = 0, k = 0;
  Dtype dtype = Dtype::bf16;
  std::int64_t batch = 1;
  // The batch is torch._grouped_mm's groups (MoE experts back to back), run by PyTorch's
  // grouped kernel (GemmSpec::grouped), not a batched cuBLAS GEMM.
  bool grouped = false;
  double flops() const {
    return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  // A + B + C once, in elements.
  double operand_elements() const {
    const double mm = static_cast<double>(m), nn = static_cast<double>(n), kk = static_cast<double>(k);
    return static_cast<double>(batch) * (mm * kk + kk * nn + mm * nn);
  }
};

struct GemmPlan {
  Dtype dtype = Dtype::bf16;
  GemmTile tile;
  int split_k = 1;
  std::int64_t tiles = 0;   // output tiles (over the whole batch)
  std::int64_t blocks = 0;  // tiles x split_k
  double flops_per_block = 0;   // padded: edge tiles compute a whole tile
  double hbm_bytes = 0;         // A + B + C (+ split-K partials), read or written once per kernel
  double hbm_bytes_per_block = 0;
};

// One SM's main-loop rate with this tile: the MMA issue rate, or the rate at which
// L2 delivers the tile's operands, whichever binds (small tiles reuse less).
double tile_flops_per_ps(const GemmTile& tile, Dtype dtype, const HardwareSpec& hw);

// What one block does: its prologue, its math at the tile's rate, its share of A+B+C.
BlockWork gemm_block_work(const GemmPlan& plan, const HardwareSpec& hw);

// One block's time given how many memory-drawing blocks share the HBM bandwidth
// left to the SMs (`hbm_bytes_per_ps`: the sustained HBM rate less what copy
// engines and NVLink traffic draw at that moment).
Tick gemm_block_time(const GemmPlan& plan, const HardwareSpec& hw, int memory_blocks_sharing, double hbm_bytes_per_ps);

// Picks tile and split-K the way a vendor heuristic does: the candidate with the
// least estimated time on the whole GPU (it cannot know about SMs another kernel
// will hold). Ties go to the earlier candidate, then to fewer splits. A grouped problem
// takes the grouped kernel's fixed tile where the hardware describes one for its dtype.
GemmPlan plan_gemm(const GemmProblem& p, const HardwareSpec& hw);

// The plan's own estimate of kernel time on `sms` free SMs (used for tile choice and reports).
Tick estimate_gemm_time(const GemmPlan& plan, const HardwareSpec& hw, int sms);

}  // namespace tpsim

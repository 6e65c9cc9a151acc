#pragma once
// GEMM cost: how cuBLAS/CUTLASS-style kernels on Hopper cut C[m,n] = A[m,k] B[k,n]
// into thread blocks, and how long one block takes. Waves are NOT computed here:
// they emerge when the block scheduler places these blocks on free SMs.
#include <compare>
#include <cstdint>
#include <numeric>
#include <vector>

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
  // Unequal groups of a grouped GEMM (MoE experts with unequal loads: one torch._grouped_mm
  // over every local expert, its offsets marking each one's rows): each group's size along m,
  // or along k where `ragged_k` (a weight gradient sums over each expert's rows). Empty:
  // `batch` equal groups. Otherwise `batch` is their count and m (or k) their mean, rounded
  // down, as PyTorch's dispatch computes it to pick the tile.
  std::vector<std::int64_t> group_sizes{};
  bool ragged_k = false;
  // How torch._scaled_mm runs an fp8 GEMM (the defaults are its own: tensor-wise scales on
  // cuBLAS, without fast accumulation).
  struct ScaledMm {
    // One scale per row of A and per column of B (rowwise scaling); on cuBLAS its
    // outer-vector-scaled kernels, where the hardware names them (gemm.library_rowwise).
    bool rowwise_scales = false;
    // Rowwise scales run by ATen's own CUTLASS kernel (GemmSpec::rowwise_scaled,
    // cost/aten_rowwise_gemm.hpp) where the hardware describes it; else by cuBLAS.
    bool aten_rowwise = false;
    // use_fast_accum: the tensor cores' own accumulator throughout. Off (torchao's gradient
    // GEMMs) the kernel promotes partial sums into fp32 registers as it goes, at
    // gemm.slow_accumulation of the rate. Grouped kernels' tiles carry their own rate.
    bool fast_accumulation = false;
    friend auto operator<=>(const ScaledMm&, const ScaledMm&) = default;
  } scaled_mm{};
  // Run by the vendor library (cuBLAS), whose own split-K rule applies where the hardware
  // describes it (gemm.library_split); false for a custom kernel (a fused ring GEMM's steps).
  bool by_library = true;
  // A thread-block cluster: m x n CTAs along C's rows and columns; none (0 x 0) where not named.
  struct Cluster {
    int m = 0, n = 0;
    bool given() const { return m > 0; }
    int ctas() const { return given() ? m * n : 1; }
    friend auto operator<=>(const Cluster&, const Cluster&) = default;
  };
  // The plan the library ran, where a measurement names it (its kernel's tile and split-K):
  // priced as given instead of chosen. No tile (the default): tpsim chooses.
  struct NamedPlan {
    int tile_m = 0, tile_n = 0, tile_k = 0;
    int split_k = 0;
    // The thread-block cluster it ran in; not named: one CTA. The grid is padded to whole
    // clusters, and a cluster's CTAs must share one GPC.
    Cluster cluster{};
    bool given() const { return tile_m > 0; }
    friend auto operator<=>(const NamedPlan&, const NamedPlan&) = default;
  } named_plan{};
  // Which of the library heuristic's algorithms runs it, in the heuristic's order: 0, its first
  // choice, is what cuBLAS runs. Only a measurement times another (what the other tiles and
  // clusters cuBLASLt offers take); tpsim prices such a row at its named plan.
  int heuristic_rank = 0;
  static constexpr int kHeuristicAlgorithms = 32;  // the most the heuristic is asked for
  // The thread-block cluster a measurement made that algorithm run in (cuBLASLt's cluster shape
  // set on it); none (the default): the one the heuristic gave it. Only a measurement sets it, to
  // time what the cluster alone changes (its CTAs share operand loads through TMA multicast);
  // such a row is priced at its named plan, which ran in it.
  Cluster cluster{};
  // Every field, in order: two problems plan alike exactly when they compare equal.
  friend auto operator<=>(const GemmProblem&, const GemmProblem&) = default;
  bool ragged() const { return !group_sizes.empty(); }
  // The ragged dimension summed over the groups (m or k times batch when the groups are equal).
  double ragged_total() const {
    if (ragged()) return static_cast<double>(std::accumulate(group_sizes.begin(), group_sizes.end(), std::int64_t{0}));
    return static_cast<double>(batch) * static_cast<double>(ragged_k ? k : m);
  }
  double flops() const {
    const double other = static_cast<double>(n) * static_cast<double>(ragged_k ? m : k);
    return 2.0 * ragged_total() * other;
  }
  // A + B + C once, in elements.
  double operand_elements() const {
    const double mm = static_cast<double>(m), nn = static_cast<double>(n), kk = static_cast<double>(k), b = static_cast<double>(batch);
    if (ragged_k) return ragged_total() * (mm + nn) + b * mm * nn;  // A and B grow with each group's k, C is per group
    return ragged_total() * (kk + nn) + b * kk * nn;                 // A and C grow with each group's rows, B is per group
  }
};

// One grouped GEMM over groups of unequal size along m (or k, with `ragged_k`): `batch` and
// the mean follow from the sizes; equal sizes give the plain grouped problem.
GemmProblem ragged_grouped_problem(const std::vector<std::int64_t>& sizes, std::int64_t m, std::int64_t n, std::int64_t k, Dtype dtype,
                                   bool ragged_k);

struct GemmPlan {
  Dtype dtype = Dtype::bf16;
  GemmTile tile;
  int split_k = 1;
  std::int64_t tiles = 0;   // output tiles (over the whole batch)
  std::int64_t blocks = 0;  // tiles x split_k
  double flops_per_block = 0;   // padded: edge tiles compute a whole tile
  double hbm_bytes = 0;         // A + B + C (split-K: the fp32 partials in place of C), read or written once per kernel
  double hbm_bytes_per_block = 0;
  // Split-K as cuBLASLt runs it out of place (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, CUTLASS's
  // ReduceSplitK): the GEMM kernel writes split_k fp32 partials of C to a workspace, then a
  // second, streaming kernel reads them and writes C. Zero without a split.
  double reduction_read_bytes = 0;
  double reduction_written_bytes = 0;
  // Chosen by the library's own split rule (gemm.library_split), not as the fastest plan.
  bool library_split = false;
  // A named plan's thread-block cluster (none: one CTA): `tiles` counts the padding CTAs that round
  // the grid up to whole clusters, and at most `resident_blocks` CTAs run at once (0: as many as
  // fit), the clusters the GPCs hold (sm.resident_clusters).
  GemmProblem::Cluster cluster{};
  std::int64_t resident_blocks = 0;
  // An fp8 GEMM whose kernel promotes its partial sums (GemmProblem::fast_accumulation off).
  bool slow_accumulation = false;
};

// One SM's main-loop rate with this tile: the MMA issue rate (less what promoting fp8 partial
// sums costs, `slow_accumulation`), or the rate at which L2 delivers the tile's operands,
// whichever binds (small tiles reuse less).
double tile_flops_per_ps(const GemmTile& tile, Dtype dtype, const HardwareSpec& hw, bool slow_accumulation = false);

// What one block does: its prologue, its math at the tile's rate, its share of A+B+C.
BlockWork gemm_block_work(const GemmPlan& plan, const HardwareSpec& hw);

// One block's time given how many memory-drawing blocks share the HBM bandwidth
// left to the SMs (`hbm_bytes_per_ps`: the sustained HBM rate less what copy
// engines and NVLink traffic draw at that moment).
Tick gemm_block_time(const GemmPlan& plan, const HardwareSpec& hw, int memory_blocks_sharing, double hbm_bytes_per_ps);

// Picks tile and split-K: where the problem names its plan (GemmProblem::named_plan), that tile
// (the hardware's tile of those dimensions for the dtype, or one of them at the rate of the
// first tile serving the dtype: one kernel family) and split; where the library's measured
// rule splits K (gemm.library_split),
// its split plan (gemm_library_split.hpp); otherwise the candidate with the least estimated
// time on the whole GPU (it cannot know about SMs another kernel will hold). Ties go to the
// earlier candidate, then to fewer splits. A grouped problem takes the grouped kernel's fixed
// tile where the hardware describes one for its dtype, an ATen rowwise one that kernel's.
GemmPlan plan_gemm(const GemmProblem& p, const HardwareSpec& hw);

// The plan's own estimate of kernel time on `sms` free SMs (used for tile choice and reports),
// split-K's reduction kernel included.
Tick estimate_gemm_time(const GemmPlan& plan, const HardwareSpec& hw, int sms);

// Split-K's reduction kernel alone on an idle GPU: its start-up, then its bytes at the HBM rate.
Tick split_k_reduction_time(const GemmPlan& plan, const HardwareSpec& hw);

}  // namespace tpsim

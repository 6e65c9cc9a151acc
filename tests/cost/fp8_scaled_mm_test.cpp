// How torch._scaled_mm runs an fp8 GEMM on cuBLAS: fast or slow accumulation
// (gemm.slow_accumulation), tensor-wise or rowwise scales (gemm.library_rowwise).
#include "support/catch.hpp"

#include <random>
#include <tuple>

#include "support/simulate.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

GemmProblem fp8(std::int64_t m, std::int64_t n, std::int64_t k, bool fast, bool rowwise = false) {
  GemmProblem p{m, n, k, Dtype::fp8};
  p.scaled_mm.fast_accumulation = fast;
  p.scaled_mm.rowwise_scales = rowwise;
  return p;
}

}  // namespace

TEST_CASE("Promoting fp8 partial sums slows a compute-bound GEMM by at most the main loop's fraction", "[cost][gemm][fp8]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.gemm.slow_accumulation < 1.0);
  // 8192^3: hundreds of waves of MMAs, so the main loop is nearly all of it; the fixed parts
  // (prologue, ramp) do not slow, so the kernel slows a little less than its main loop.
  const double fast = kernel_alone_us(GemmOp{fp8(8192, 8192, 8192, true)});
  const double slow = kernel_alone_us(GemmOp{fp8(8192, 8192, 8192, false)});
  CHECK(slow > fast);
  CHECK(slow / fast <= 1.0 / hw.gemm.slow_accumulation + 1e-9);
  CHECK(slow / fast > 1.0 + 0.9 * (1.0 / hw.gemm.slow_accumulation - 1.0));
  // A GEMM that waits on HBM (one row of tokens against a weight) is paced by its bytes either way.
  const double fast_thin = kernel_alone_us(GemmOp{fp8(16, 8192, 8192, true)});
  const double slow_thin = kernel_alone_us(GemmOp{fp8(16, 8192, 8192, false)});
  CHECK(slow_thin / fast_thin < slow / fast);
}

TEST_CASE("Accumulation is fp8's alone: bf16 and PyTorch's grouped fp8 kernel keep their rate", "[cost][gemm][fp8]") {
  HardwareSpec hw = h100();
  GemmProblem bf16{8192, 8192, 8192, Dtype::bf16};
  const double bf16_us = kernel_alone_us(GemmOp{bf16}, hw);
  bf16.scaled_mm.fast_accumulation = true;
  CHECK(kernel_alone_us(GemmOp{bf16}, hw) == bf16_us);
  // torch._scaled_grouped_mm always accumulates fast (its tiles' rates say so): the flag is moot.
  GemmProblem grouped{2048, 4096, 7168, Dtype::fp8, 8, true};
  const double grouped_us = kernel_alone_us(GemmOp{grouped}, hw);
  grouped.scaled_mm.fast_accumulation = true;
  CHECK(kernel_alone_us(GemmOp{grouped}, hw) == grouped_us);
  // A model that does not tell them apart prices both alike.
  hw.gemm.slow_accumulation = 1.0;
  CHECK(kernel_alone_us(GemmOp{fp8(8192, 8192, 8192, false)}, hw) == kernel_alone_us(GemmOp{fp8(8192, 8192, 8192, true)}, hw));
}

TEST_CASE("cuBLAS runs rowwise scales in its one outer-vector-scaled tile, over the whole K", "[cost][gemm][fp8]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.gemm.library_rowwise.serves(Dtype::fp8));
  const GemmTile& tile = hw.gemm.library_rowwise.tile;
  // Llama 3 8B's wk weight gradient under TP 8 (128 x 4096 over 16,384 tokens): tensor-wise
  // scales split K or take a smaller tile to fill the SMs; rowwise ones cannot.
  for (const auto& [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{128, 4096, 16384}, {16384, 128, 4096}, {8192, 3584, 8192}, {1000, 3000, 4096}}) {
    const GemmPlan rowwise = plan_gemm(fp8(m, n, k, false, true), hw);
    CHECK(rowwise.tile.m == tile.m);
    CHECK(rowwise.tile.n == tile.n);
    CHECK(rowwise.tile.k == tile.k);
    CHECK(rowwise.split_k == 1);
    // Conservation: its tiles hold the whole output.
    CHECK(static_cast<double>(rowwise.tiles) * tile.m * tile.n >= static_cast<double>(m) * static_cast<double>(n));
  }
  const GemmPlan tensorwise = plan_gemm(fp8(128, 4096, 16384, false), hw);
  CHECK((tensorwise.split_k > 1 || tensorwise.tile.m != tile.m || tensorwise.tile.n != tile.n));
  CHECK(kernel_alone_us(GemmOp{fp8(128, 4096, 16384, false, true)}) > 1.3 * kernel_alone_us(GemmOp{fp8(128, 4096, 16384, false)}));
}

TEST_CASE("Rowwise scales on cuBLAS are never faster than tensor-wise ones: a subset of the plans", "[cost][gemm][fp8][property]") {
  std::mt19937 rng(11);
  for (int i = 0; i < 60; ++i) {
    const std::int64_t m = 64 * (1 + rng() % 256), n = 64 * (1 + rng() % 128), k = 128 * (1 + rng() % 128);
    const bool fast = i % 2 == 0;
    const double rowwise = kernel_alone_us(GemmOp{fp8(m, n, k, fast, true)});
    const double tensorwise = kernel_alone_us(GemmOp{fp8(m, n, k, fast)});
    INFO(m << "x" << n << "x" << k << (fast ? " fast" : " slow"));
    CHECK(rowwise >= tensorwise * 0.98);  // the heuristic's estimate may miss the simulated best by 2%
  }
}

TEST_CASE("ATen's rowwise kernel keeps its own tiles, and without the outer-vector tile cuBLAS's rowwise is its tensor-wise", "[cost][gemm][fp8]") {
  HardwareSpec hw = h100();
  GemmProblem aten = fp8(98304, 128, 4096, false, true);
  aten.scaled_mm.aten_rowwise = true;
  CHECK(plan_gemm(aten, hw).cluster.ctas() == 2);  // ATen's clusters of two, not the library's tile
  hw.gemm.library_rowwise = {};
  const GemmPlan rowwise = plan_gemm(fp8(128, 4096, 16384, false, true), hw);
  const GemmPlan tensorwise = plan_gemm(fp8(128, 4096, 16384, false), hw);
  CHECK(rowwise.tile.m == tensorwise.tile.m);
  CHECK(rowwise.tile.n == tensorwise.tile.n);
  CHECK(rowwise.split_k == tensorwise.split_k);
}

// ATen's rowwise-scaled fp8 GEMM (RowwiseScaledMM.cu): its cluster, orientation and tile.
#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/aten_rowwise_gemm.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

GemmProblem rowwise(std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmProblem p{m, n, k, Dtype::fp8};
  p.scaled_mm.aten_rowwise = true;
  return p;
}

}  // namespace

TEST_CASE("Skinny outputs that are an odd multiple of 64 wide take a cluster along their long side", "[cost][gemm][fp8]") {
  const AtenRowwiseChoice rows64 = aten_rowwise_choice(64, 4096, 132), columns64 = aten_rowwise_choice(4096, 64, 132);
  CHECK_FALSE(rows64.transposed);
  CHECK(columns64.transposed);
  // Either way the kernel's 64 rows face 4096 columns, clustered two along the columns.
  for (const AtenRowwiseChoice& c : {rows64, columns64}) {
    CHECK(c.kernel_m == 64);
    CHECK(c.kernel_n == 4096);
    CHECK(c.cluster.m == 1);
    CHECK(c.cluster.n == 2);
  }
  CHECK(aten_rowwise_choice(192, 4096, 132).transposed);  // the source's own exception: 192 rows go transposed
}

TEST_CASE("The 64-row tile serves while its clusters fit one wave of the SMs, the 128-row tile past that", "[cost][gemm][fp8]") {
  // 256 x 1024: the kernel computes 1024 x 256 (transposed), 16 x 1 clusters of two 64 x 128 tiles.
  const AtenRowwiseChoice small = aten_rowwise_choice(256, 1024, 132);
  CHECK(small.small_tile);
  // The same shape on a GPU with a sixteenth of the SMs overflows a wave: the large tile.
  CHECK_FALSE(aten_rowwise_choice(256, 1024, 8).small_tile);
  // Growing the rows at 4096 columns: once the small tile overflows it never comes back.
  bool seen_large = false;
  for (std::int64_t m = 256; m <= 16384; m += 256) {
    const bool small_tile = aten_rowwise_choice(m, 4096, 132).small_tile;
    if (seen_large) CHECK_FALSE(small_tile);
    seen_large = seen_large || !small_tile;
  }
  CHECK(seen_large);
}

TEST_CASE("A thin linear (Llama's wk under TP 8) runs 128 x 128 tiles in clusters along its rows", "[cost][gemm][fp8]") {
  const AtenRowwiseChoice c = aten_rowwise_choice(98304, 128, 132);
  CHECK_FALSE(c.transposed);
  CHECK(c.cluster.m == 2);
  CHECK(c.cluster.n == 1);
  CHECK_FALSE(c.small_tile);
}

TEST_CASE("A rowwise plan covers the output with fixed tiles, unsplit, in whole clusters", "[cost][gemm][fp8]") {
  for (const auto& [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{98304, 128, 4096}, {256, 1024, 8192}, {8192, 7168, 4096}, {1000, 3000, 4096}}) {
    const GemmProblem p = rowwise(m, n, k);
    const GemmPlan plan = plan_gemm(p, h100());
    CHECK(plan.split_k == 1);
    CHECK(plan.tile.n == 128);
    CHECK(plan.tile.k == 128);
    CHECK((plan.tile.m == 64 || plan.tile.m == 128));
    CHECK(plan.cluster.ctas() == 2);
    CHECK(plan.tiles % 2 == 0);
    // Conservation: the padded tiles hold the whole output and do at least its FLOPs.
    CHECK(static_cast<double>(plan.tiles) * plan.tile.m * plan.tile.n >= static_cast<double>(m) * static_cast<double>(n));
    CHECK(static_cast<double>(plan.blocks) * plan.flops_per_block >= p.flops());
  }
}

TEST_CASE("Without ATen's rowwise kernel in the hardware model, a rowwise GEMM is planned as cuBLAS's", "[cost][gemm][fp8]") {
  HardwareSpec hw = h100();
  hw.gemm.rowwise_scaled = {};
  const GemmPlan library = plan_gemm(GemmProblem{98304, 128, 4096, Dtype::fp8}, hw);
  const GemmPlan aten_asked = plan_gemm(rowwise(98304, 128, 4096), hw);
  CHECK(aten_asked.tile.m == library.tile.m);
  CHECK(aten_asked.tile.n == library.tile.n);
  CHECK(aten_asked.split_k == library.split_k);
  CHECK(aten_asked.blocks == library.blocks);
}

TEST_CASE("At one efficiency, the fixed-tile kernel is never faster than cuBLAS's best plan", "[cost][gemm][fp8]") {
  // Same per-tile rate as the cuBLAS fp8 tiles (as shipped): the library's choice among all its
  // tiles and splits can only match or beat two fixed tiles without split-K.
  for (const auto& [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{98304, 128, 4096}, {2048, 1024, 8192}, {16384, 7168, 8192}}) {
    const double aten = kernel_alone_us(GemmOp{rowwise(m, n, k)});
    const double library = kernel_alone_us(GemmOp{GemmProblem{m, n, k, Dtype::fp8}});
    CHECK(aten >= library * 0.98);
  }
}

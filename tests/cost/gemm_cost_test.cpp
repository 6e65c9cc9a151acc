#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/cost/gemm_planner.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

// A GEMM library with one tile shape: the staircase of its waves, undisguised.
HardwareSpec one_tile(int m, int n) {
  HardwareSpec hw = h100();
  std::erase_if(hw.gemm.tiles, [&](const GemmTile& t) { return t.m != m || t.n != n || !t.serves(Dtype::bf16); });
  return hw;
}

}  // namespace

TEST_CASE("GEMM time over growing M is a staircase for one tile shape: flat within a wave, a jump past 132 tiles", "[cost][gemm]") {
  // n = 4096, k = 8192: 128x256 tiles give 16 tiles per 128-row band. M = 640 (80 tiles)
  // and M = 1024 (128 tiles) both fit one wave; M = 1152 needs more than 132 blocks
  // and M = 1536 stays on that second step.
  const HardwareSpec hw = one_tile(128, 256);
  REQUIRE(hw.gemm.tiles.size() == 1);
  const double t640 = gemm_alone_us(640, 4096, 8192, Dtype::bf16, hw);
  const double t1024 = gemm_alone_us(1024, 4096, 8192, Dtype::bf16, hw);
  const double t1152 = gemm_alone_us(1152, 4096, 8192, Dtype::bf16, hw);
  const double t1536 = gemm_alone_us(1536, 4096, 8192, Dtype::bf16, hw);
  CHECK(t1024 < 1.06 * t640);  // 60% more FLOPs, hardly more time
  CHECK(t1152 > 1.4 * t1024);  // 12% more FLOPs, an extra wave (split K softens it, not away)
  CHECK(t1536 == Approx(t1152).epsilon(0.02));
  CHECK(plan_gemm({1152, 4096, 8192, Dtype::bf16}, hw).blocks > 132);
}

TEST_CASE("cuBLAS's odd tile sizes soften the staircase: past a wave, time grows about with the FLOPs", "[cost][gemm]") {
  // cuBLAS 13 on an H100 picks 144-, 168-, 192- and 320-wide tiles that fill the SMs (measured:
  // 8192 -> 8448 rows of an 8192^2 GEMM cost 0.6% more for 3% more FLOPs, h100_sxm_torch_ops.json;
  // 4096 -> 4224 rows 3.6% more on a second H100's burst run, where the file's sustained 4224
  // row, 983 us, is an outlier of its machine's clock).
  const double t1024 = gemm_alone_us(1024, 4096, 8192, Dtype::bf16);
  const double t1152 = gemm_alone_us(1152, 4096, 8192, Dtype::bf16);
  CHECK(t1152 < gemm_alone_us(1152, 4096, 8192, Dtype::bf16, one_tile(128, 256)));
  CHECK(t1152 < 1.25 * t1024);
  CHECK(t1152 > t1024);  // never free: 12% more FLOPs
}

TEST_CASE("The tile heuristic prefers big tiles for big problems and fills the SMs for tiny M", "[cost][gemm]") {
  const auto big = plan_gemm({8192, 8192, 8192, Dtype::bf16}, h100());
  CHECK(big.tile.m * big.tile.n >= 128 * 192);  // cuBLAS runs it with 128x320 (nvjet 320x128)
  CHECK(big.split_k == 1);
  // 128 x 3584 gives 14 tiles of 128x256, far from 132 SMs: smaller tiles or split K
  // give it many more blocks.
  const auto skinny = plan_gemm({128, 3584, 8192, Dtype::bf16}, h100());
  CHECK(skinny.blocks >= 4 * 14);
  CHECK((skinny.split_k > 1 || skinny.tile.m * skinny.tile.n < 128 * 256));
  // Without small tiles the only way to fill the SMs is to split K.
  HardwareSpec big_tiles_only = h100();
  std::erase_if(big_tiles_only.gemm.tiles, [](const GemmTile& t) { return t.m * t.n < 128 * 128; });
  const auto split = plan_gemm({128, 3584, 8192, Dtype::bf16}, big_tiles_only);
  CHECK(split.split_k > 1);
  CHECK(split.blocks > split.tiles);
}

TEST_CASE("A tile's K-loop rate: issue-bound for big tiles, fed by L2 for small ones", "[cost][gemm]") {
  const HardwareSpec hw = h100();
  auto tile = [&](int m, int n) {
    for (const GemmTile& t : hw.gemm.tiles)
      if (t.m == m && t.n == n && t.serves(Dtype::bf16)) return t;
    FAIL("no " << m << "x" << n << " tile");
    return GemmTile{};
  };
  const double peak = hw.peak_flops_per_sm_per_ps(Dtype::bf16);
  const GemmTile large = tile(128, 256), mid = tile(128, 128), small = tile(64, 64);
  // Every tensor-core tile issues at one rate; only operand supply tells them apart.
  CHECK(large.mainloop_efficiency == mid.mainloop_efficiency);
  CHECK(small.mainloop_efficiency == large.mainloop_efficiency);
  const double r_large = tile_flops_per_ps(large, Dtype::bf16, hw), r_small = tile_flops_per_ps(small, Dtype::bf16, hw);
  CHECK(r_large == Approx(peak * large.mainloop_efficiency));
  CHECK(r_small < r_large);
  CHECK(tile_flops_per_ps(mid, Dtype::bf16, hw) >= r_small);
  // L2-bound: a 64x64 tile loads 128 operands per 64x64 MMAs, so its rate is the load rate x 32 FLOP/B.
  CHECK(r_small == Approx(hw.gemm.l2_load_bytes_per_ps_per_sm * 2.0 * 64 * 64 / (128 * 2)));
  // Doubling L2 bandwidth doubles the starved tile's rate (up to the issue rate) and leaves the big one alone.
  HardwareSpec wide = hw;
  wide.gemm.l2_load_bytes_per_ps_per_sm *= 2;
  CHECK(tile_flops_per_ps(small, Dtype::bf16, wide) == Approx(std::min(2 * r_small, peak * small.mainloop_efficiency)));
  CHECK(tile_flops_per_ps(large, Dtype::bf16, wide) == Approx(r_large));
  // fp8 halves the bytes per operand and doubles the peak: the same fraction of peak.
  CHECK(tile_flops_per_ps(small, Dtype::fp8, hw) / hw.peak_flops_per_sm_per_ps(Dtype::fp8) == Approx(r_small / peak).epsilon(1e-3));  // fp8 peak is 2x bf16 to 4 digits
}

TEST_CASE("Halving the tensor-core rate doubles a compute-bound GEMM", "[cost][gemm]") {
  HardwareSpec slow = h100();
  for (auto& p : slow.peak_flops_per_ps) p /= 2;
  const double fast_t = gemm_alone_us(8192, 8192, 8192, Dtype::bf16);
  const double slow_t = gemm_alone_us(8192, 8192, 8192, Dtype::bf16, slow);
  CHECK(slow_t / fast_t == Approx(2.0).epsilon(0.02));
}

TEST_CASE("A memory-bound GEMM is limited by HBM: its time tracks bytes, not FLOPs", "[cost][gemm]") {
  HardwareSpec half_bw = h100();
  half_bw.memory.hbm_bytes_per_ps /= 2;
  // M = 64 rows against a 58.7 MB weight: reading the weight dominates.
  const double t = gemm_alone_us(64, 3584, 8192, Dtype::bf16);
  const double t_half = gemm_alone_us(64, 3584, 8192, Dtype::bf16, half_bw);
  CHECK(t_half > 1.6 * t);
  const double weight_read_us = 8192.0 * 3584 * 2 / (h100().memory.hbm_bytes_per_ps * 1e6);
  CHECK(t > weight_read_us);
}

TEST_CASE("Seed 000's arithmetic: 256 tiles take 2 waves on 132 SMs and 3 with 10 SMs held", "[cost][gemm][seed000]") {
  // 2048 x 4096 output with 128x256 tiles = 256 tiles.
  const GemmProblem p{2048, 4096, 4096, Dtype::bf16};
  REQUIRE(plan_gemm(p, h100()).blocks == 256);
  const double alone = gemm_alone_us(p.m, p.n, p.k, p.dtype);

  // The same GEMM launched while a 10-channel communication kernel holds 10 SMs.
  HardwareSpec hw = h100();
  hw.nccl.max_channels = 10;
  for (auto& proto : hw.nccl.protocols) proto.channel_threshold = 1;  // all 10 channels even for a small message
  Dag dag(2);
  const int group = dag.new_group();
  OpId gemm = 0;
  for (int r = 0; r < 2; ++r) {
    dag.add(r, 1, "nccl", CollectiveOp{CollectiveKind::all_gather, 2e9, group});  // long-running, launched first
    const OpId g = dag.add(r, 0, "gemm", GemmOp{p});
    if (r == 0) gemm = g;
  }
  const Timeline tl = execute(dag, hw);
  const double contended = op_us(tl, gemm);
  const double one_wave = alone / 2;
  CHECK(contended / one_wave == Approx(3.0).epsilon(0.05));
  CHECK(contended / alone == Approx(1.5).epsilon(0.05));  // "about 50% longer"
}

TEST_CASE("fp32 GEMMs run FFMA tiles: small-M time falls with M instead of padding to a tensor-core tile", "[cost][gemm]") {
  // Skinny fp32 GEMMs (a few rows against a wide, deep weight) as a decomposition makes them.
  const double t16 = gemm_alone_us(16, 4096, 4096, Dtype::fp32);
  const double t64 = gemm_alone_us(64, 4096, 4096, Dtype::fp32);
  const double t256 = gemm_alone_us(256, 4096, 4096, Dtype::fp32);
  INFO("M=16 " << t16 << " us, M=64 " << t64 << " us, M=256 " << t256 << " us");
  CHECK(t16 < t64);
  CHECK(t64 < t256);
  const auto plan = plan_gemm({16, 4096, 4096, Dtype::fp32}, h100());
  CHECK(plan.tile.m <= 32);  // no 64-row tensor-core tile for fp32
  CHECK(plan.tile.k == 8);
  // bf16 keeps its tensor-core tiles.
  CHECK(plan_gemm({16, 4096, 4096, Dtype::bf16}, h100()).tile.k == 64);
}

TEST_CASE("A batched GEMM shares the SMs: a batch of GPU-filling products costs their sum, small ones fill idle SMs", "[cost][gemm]") {
  // 8192^2 x 4096 fills many waves alone: a batch of 2 is twice the work in twice the time.
  const double one = gemm_alone_us(8192, 8192, 4096, Dtype::bf16);
  const double two = gemm_alone_us(8192, 8192, 4096, Dtype::bf16, h100(), 2);
  CHECK(two / one == Approx(2.0).epsilon(0.03));
  // 256 x 1024 x 512 bf16: too shallow to split K, even its 64 tiles of 64x64 leave 68 SMs
  // idle, so 2 of them in one launch (128 tiles, still one wave) take far less than 2
  // launches' worth.
  const double small = gemm_alone_us(256, 1024, 512, Dtype::bf16);
  const double two_small = gemm_alone_us(256, 1024, 512, Dtype::bf16, h100(), 2);
  CHECK(two_small < 1.5 * small);
  CHECK(two_small >= small);
  // The plan counts every product's tiles, bytes and FLOPs.
  const GemmProblem p{512, 2048, 4096, Dtype::bf16, 4};
  const GemmPlan batched = plan_gemm(p, h100());
  const GemmPlan single = plan_gemm({512, 2048, 4096, Dtype::bf16}, h100());
  CHECK(p.flops() == 4 * GemmProblem{512, 2048, 4096, Dtype::bf16}.flops());
  CHECK(batched.hbm_bytes >= 4 * 2.0 * (512.0 * 4096 + 4096.0 * 2048 + 512.0 * 2048));
  CHECK(batched.tiles == 4 * (batched.tiles / 4));
  // Every product's output tiles, none shared or lost.
  CHECK(batched.tiles == 4 * ((512 + batched.tile.m - 1) / batched.tile.m) * ((2048 + batched.tile.n - 1) / batched.tile.n));
  CHECK(single.tiles == ((512 + single.tile.m - 1) / single.tile.m) * ((2048 + single.tile.n - 1) / single.tile.n));
}

TEST_CASE("A thin GEMM is bound by reading its weight: flat in M up to 128 rows, never under weight bytes over HBM", "[cost][gemm]") {
  // The decode-time shapes of vllm PR 49363 (models/measurements/vllm_h100_skinny_gemm.json):
  // cuBLAS runs 1 to 128 rows against a 12288 x 5376 bf16 weight in 46-48 us, the time to
  // read the 132 MB weight once.
  const double weight_bytes = 12288.0 * 5376.0 * 2.0;
  const double floor_us = weight_bytes / h100().memory.hbm_bytes_per_ps * 1e-6;
  const double t1 = gemm_alone_us(1, 12288, 5376, Dtype::bf16);
  const double t128 = gemm_alone_us(128, 12288, 5376, Dtype::bf16);
  INFO("1 row " << t1 << " us, 128 rows " << t128 << " us, weight read " << floor_us << " us");
  CHECK(t1 >= floor_us);
  CHECK(t128 < 1.1 * t1);       // 128x the FLOPs, the same bytes
  CHECK(t128 < 1.25 * floor_us);  // and close to the read itself
}

TEST_CASE("PyTorch's grouped GEMM runs the tile its dispatch fixes, so it never beats the heuristic's batched GEMM", "[cost][gemm]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.gemm.grouped.present());
  // DeepSeek-V3 16B's experts on one of 8 EP ranks: 8 groups of 12,288 rows, w1's 1,408 columns.
  GemmProblem p{12288, 1408, 2048, Dtype::bf16, 8, true};
  const GemmPlan grouped = plan_gemm(p, hw);
  CHECK(grouped.tile.m == 128);
  CHECK(grouped.tile.n == 256);
  CHECK(grouped.split_k == 1);
  // 1,408 columns take 6 tiles of 256, as 1,536 do: the same blocks, the same time.
  CHECK(grouped.tiles == 8 * (12288 / 128) * 6);
  const double t1408 = kernel_alone_us(GemmOp{p}, hw);
  CHECK(kernel_alone_us(GemmOp{{12288, 1536, 2048, Dtype::bf16, 8, true}}, hw) == Approx(t1408).epsilon(1e-6));
  // The heuristic may pick any tile, this one included: the batched GEMM is never slower.
  GemmProblem batched = p;
  batched.grouped = false;
  CHECK(kernel_alone_us(GemmOp{batched}, hw) <= t1408 * 1.0001);
  // Groups of at most 128 rows (or columns) take the small ping-pong tile.
  const GemmPlan small = plan_gemm({96, 1408, 2048, Dtype::bf16, 8, true}, hw);
  CHECK(small.tile.m == hw.gemm.grouped.small_tile.m);
  CHECK(small.tile.k == hw.gemm.grouped.small_tile.k);
  // Hardware without the kernel plans a grouped problem as batched.
  HardwareSpec without = hw;
  without.gemm.grouped = {};
  CHECK(kernel_alone_us(GemmOp{p}, without) == Approx(kernel_alone_us(GemmOp{batched}, hw)).epsilon(1e-9));
}

TEST_CASE("fp8 grouped GEMMs take torch._scaled_grouped_mm's tiles, by the groups' shape", "[cost][gemm]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.gemm.scaled_grouped.present());
  const auto tile_of = [&](std::int64_t m, std::int64_t n, std::int64_t k) { return plan_gemm({m, n, k, Dtype::fp8, 8, true}, hw).tile; };
  // ScaledGroupMM.cu: groups of at most 128 rows or columns take the ping-pong 64x128x128 ...
  CHECK(tile_of(96, 1408, 2048).m == 64);
  CHECK(tile_of(2048, 128, 4096).k == 128);
  // ... groups where two of M, N, K reach 2,048 the 256x128x128 tile ...
  CHECK(tile_of(6144, 1408, 2048).m == 256);
  CHECK(tile_of(1536, 2048, 2048).m == 256);
  // ... every other the 128x256x64 one (DeepSeek-V3 16B's 1,536-row groups: K 2,048, N 1,408).
  const GemmTile mid = tile_of(1536, 1408, 2048);
  CHECK(mid.m == 128);
  CHECK(mid.n == 256);
  CHECK(mid.k == 64);
  // bf16 keeps its own kernel, which has no large-problem tile.
  CHECK(plan_gemm({6144, 1408, 2048, Dtype::bf16, 8, true}, hw).tile.m == 128);
  // Twice the rows per group on a full grid: twice the tiles, about twice the time.
  const double t6144 = kernel_alone_us(GemmOp{{6144, 1408, 2048, Dtype::fp8, 8, true}}, hw);
  const double t12288 = kernel_alone_us(GemmOp{{12288, 1408, 2048, Dtype::fp8, 8, true}}, hw);
  CHECK(t12288 == Approx(2 * t6144).epsilon(0.05));
  // Without the fp8 kernel in the hardware file, fp8 grouped problems plan as batched.
  HardwareSpec without = hw;
  without.gemm.scaled_grouped = {};
  CHECK(plan_gemm({12288, 1408, 2048, Dtype::fp8, 8, true}, without).blocks == plan_gemm({12288, 1408, 2048, Dtype::fp8, 8}, hw).blocks);
}

TEST_CASE("The GEMM planner remembers each problem's plan and gives what plan_gemm gives", "[cost][gemm]") {
  const HardwareSpec& hw = h100();
  GemmPlanner planner(hw);
  const GemmProblem p{12288, 1408, 2048, Dtype::bf16, 8};
  GemmProblem grouped = p;
  grouped.grouped = true;
  const GemmPlan& first = planner.plan(p);
  CHECK(&planner.plan(p) == &first);  // looked up, not planned again
  const GemmPlan direct = plan_gemm(p, hw);
  CHECK(first.tile.m == direct.tile.m);
  CHECK(first.tile.n == direct.tile.n);
  CHECK(first.split_k == direct.split_k);
  CHECK(first.blocks == direct.blocks);
  // Every field of the problem is part of the key: the grouped kernel's plan is another.
  CHECK(&planner.plan(grouped) != &first);
  CHECK(planner.plan(grouped).tile.n == hw.gemm.grouped.large_tile.n);
  CHECK(planner.plan({12288, 1408, 2048, Dtype::fp8, 8}).dtype == Dtype::fp8);
}

TEST_CASE("a grouped GEMM over unequal groups: each group's tiles in one grid, its FLOPs conserved, never slower than a kernel per size", "[cost][gemm]") {
  const HardwareSpec& hw = h100();
  // One expert at 3,072 rows and seven at 1,024 (skewed routing), N 1,408, K 2,048.
  std::vector<std::int64_t> rows{3072, 1024, 1024, 1024, 1024, 1024, 1024, 1024};
  const GemmProblem ragged = ragged_grouped_problem(rows, 0, 1408, 2048, Dtype::bf16, false);
  REQUIRE(ragged.ragged());
  CHECK(ragged.batch == 8);
  CHECK(ragged.m == (3072 + 7 * 1024) / 8);  // PyTorch's dispatch sees the mean
  CHECK(ragged.flops() == Approx(2.0 * (3072 + 7 * 1024) * 1408 * 2048));
  const GemmPlan plan = plan_gemm(ragged, hw);
  CHECK(plan.tiles == (3072 / 128 + 7 * 1024 / 128) * 6);
  // One kernel fills the SMs the two kernels' tails leave idle.
  const double one = kernel_alone_us(GemmOp{ragged}, hw);
  const double two = kernel_alone_us(GemmOp{{3072, 1408, 2048, Dtype::bf16, 1, true}}, hw) +
                     kernel_alone_us(GemmOp{{1024, 1408, 2048, Dtype::bf16, 7, true}}, hw);
  CHECK(one < two);
  // Equal groups are the plain grouped problem.
  const GemmProblem equal = ragged_grouped_problem(std::vector<std::int64_t>(8, 1024), 0, 1408, 2048, Dtype::bf16, false);
  CHECK_FALSE(equal.ragged());
  CHECK(equal.m == 1024);
  // Ragged along K (a weight gradient over each expert's rows): the FLOPs and operand bytes of every group.
  const GemmProblem deep = ragged_grouped_problem(rows, 2048, 1408, 0, Dtype::bf16, true);
  CHECK(deep.k == (3072 + 7 * 1024) / 8);
  CHECK(deep.flops() == Approx(2.0 * 2048 * 1408 * (3072 + 7 * 1024)));
  CHECK(deep.operand_elements() == Approx((3072.0 + 7 * 1024) * (2048 + 1408) + 8.0 * 2048 * 1408));
  const GemmPlan deep_plan = plan_gemm(deep, hw);
  CHECK(deep_plan.tiles == 8 * (2048 / 128) * 6);
  CHECK(deep_plan.flops_per_block * static_cast<double>(deep_plan.blocks) >= deep.flops());
}

#include "support/catch.hpp"

#include <cmath>

#include "support/measurement_rows.hpp"
#include "support/simulate.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/cost/l2_writeback.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
const L2Reference kBackToBack{.fitted_after_dirty_l2 = false};  // GEMMs' parameters
const L2Reference kAfterDirty{.fitted_after_dirty_l2 = true};   // streaming kernels' start-ups

MemorySpec l2_of_50_mib() {
  MemorySpec m;
  m.l2_capacity_bytes = 50 * kMiB;
  m.l2_dirty_bytes = 25 * kMiB;
  return m;
}

HardwareSpec after(L2Start start) {
  HardwareSpec hw = h100();
  hw.memory.l2_start = start;
  return hw;
}

}  // namespace

TEST_CASE("A kernel evicts dirty lines as often as they are left: exponential in what it streams, never more than there are",
          "[cost][l2]") {
  const MemorySpec m = l2_of_50_mib();
  CHECK(l2_dirty_left(m.l2_dirty_bytes, m.l2_capacity_bytes, 0) == m.l2_dirty_bytes);
  // Streaming one L2 of bytes leaves 1/e of the dirty lines; two, 1/e^2.
  CHECK(l2_dirty_left(m.l2_dirty_bytes, m.l2_capacity_bytes, 50 * kMiB) == Approx(m.l2_dirty_bytes / std::exp(1.0)));
  CHECK(l2_dirty_left(m.l2_dirty_bytes, m.l2_capacity_bytes, 100 * kMiB) == Approx(m.l2_dirty_bytes / std::exp(2.0)));
  double last = 0;
  for (double touched : {1.0, 8.0, 64.0, 512.0, 4096.0}) {
    const double extra = l2_extra_bytes(m.l2_dirty_bytes, kBackToBack, m, touched * kMiB, 0);
    CHECK(extra > last);                  // more traffic evicts more
    CHECK(extra <= m.l2_dirty_bytes);     // but no more than the L2 held dirty
    last = extra;
  }
  CHECK(last == Approx(m.l2_dirty_bytes).epsilon(1e-6));
  // What a kernel leaves dirty: its own writes on top, never more than the L2 keeps.
  CHECK(l2_dirty_after(0, m, 4 * kMiB, 4 * kMiB) == Approx(4 * kMiB));
  CHECK(l2_dirty_after(m.l2_dirty_bytes, m, 400 * kMiB, 200 * kMiB) == Approx(m.l2_dirty_bytes));
}

TEST_CASE("Dirty lines cost a kernel what a clean L2 saves it, whatever its parameters were fitted after", "[cost][l2]") {
  const MemorySpec m = l2_of_50_mib();
  for (const L2Reference& ref : {kBackToBack, kAfterDirty})
    for (double touched : {2.0, 20.0, 200.0}) {
      const double dirty = l2_extra_bytes(m.l2_dirty_bytes, ref, m, touched * kMiB, kMiB);
      const double clean = l2_extra_bytes(0, ref, m, touched * kMiB, kMiB);
      CHECK(dirty - clean == Approx(m.l2_dirty_bytes - l2_dirty_left(m.l2_dirty_bytes, m.l2_capacity_bytes, touched * kMiB)));
    }
  // A streaming kernel's start-ups describe a dirty L2: after a dirty flush it moves nothing
  // more, after a clean one less. A GEMM's describe its own output dirty: after a clean flush
  // it saves that output's write-back, after a dirty one it pays the flush's.
  CHECK(l2_extra_bytes(m.l2_dirty_bytes, kAfterDirty, m, 64 * kMiB, 32 * kMiB) == 0);
  CHECK(l2_extra_bytes(0, kAfterDirty, m, 64 * kMiB, 32 * kMiB) < 0);
  CHECK(l2_extra_bytes(0, kBackToBack, m, 128 * kMiB, kMiB) < 0);
  CHECK(l2_extra_bytes(m.l2_dirty_bytes, kBackToBack, m, 128 * kMiB, kMiB) > 0);
  // A model without the L2's description changes nothing.
  CHECK(l2_extra_bytes(25 * kMiB, kBackToBack, MemorySpec{}, 128 * kMiB, 0) == 0);
}

TEST_CASE("After a dirty flush a thin GEMM pays the write-back at the HBM's rate, a compute-bound one hides it", "[cost][l2][gemm]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.memory.l2_dirty_bytes > 0);
  // 128 x 4096 x 14336 streams its 117 MB weight: bound by HBM, as thin shards' submatmuls are.
  const double thin = gemm_alone_us(128, 4096, 14336, Dtype::bf16);
  const double thin_dirty = gemm_alone_us(128, 4096, 14336, Dtype::bf16, after(L2Start::dirty));
  const double thin_clean = gemm_alone_us(128, 4096, 14336, Dtype::bf16, after(L2Start::clean));
  // Its 117 MB evict 1 - exp(-117 / 52.4) of the dirty lines: their write-back at the HBM's rate
  // is what a dirty flush costs it over a clean one.
  const double touched = (128.0 * 14336 + 4096.0 * 14336 + 128.0 * 4096) * 2;
  const double evicted = hw.memory.l2_dirty_bytes - l2_dirty_left(hw.memory.l2_dirty_bytes, hw.memory.l2_capacity_bytes, touched);
  const double writeback_us = evicted / hw.memory.hbm_bytes_per_ps * 1e-6;
  INFO("back to back " << thin << " us, after a dirty flush " << thin_dirty << ", after a clean one " << thin_clean << "; "
                       << writeback_us << " us to write the evicted dirty lines back");
  CHECK(thin_dirty - thin_clean == Approx(writeback_us).epsilon(0.1));
  // Back to back it wrote back only its own small output; its math hides part of the rest.
  CHECK(thin_clean < thin);
  CHECK(thin_dirty - thin > 0.5 * writeback_us);
  const double square = gemm_alone_us(8192, 8192, 8192, Dtype::bf16);
  CHECK(gemm_alone_us(8192, 8192, 8192, Dtype::bf16, after(L2Start::dirty)) == Approx(square).epsilon(0.002));
}

TEST_CASE("Only the ops of a run after a flush find its L2, and a copy after a dirty one costs what its start-ups were fitted to",
          "[cost][l2]") {
  const ElementwiseOp copy{64 * kMiB, 64 * kMiB};
  const double fitted = kernel_alone_us(copy);
  CHECK(kernel_alone_us(copy, after(L2Start::dirty)) == Approx(fitted));
  CHECK(kernel_alone_us(copy, after(L2Start::clean)) < fitted);
  // A second kernel finds the first one's lines, not the flush's: two copies after a dirty
  // flush take what two copies back to back do, but for what the first evicted.
  Dag dag(1);
  dag.add(0, 0, "first", ElementwiseOp{4 * kMiB, 4 * kMiB});
  const OpId second = dag.add(0, 0, "second", GemmOp{{128, 4096, 14336, Dtype::bf16}});
  const double second_dirty = op_us(execute(dag, after(L2Start::dirty)), second);
  const double second_fitted = op_us(execute(dag, h100()), second);
  CHECK(second_dirty > second_fitted);  // a small copy left most of the dirty lines
  CHECK(second_dirty < gemm_alone_us(128, 4096, 14336, Dtype::bf16, after(L2Start::dirty)));
}

TEST_CASE("Measurement rows and scenarios say the L2 their op started from, and a bad state is one line", "[cost][l2][io]") {
  const auto rows = parse(R"([{"kind": "gemm", "m": 128, "n": 4096, "k": 14336, "dtype": "bf16", "l2": "dirty", "time_us": 58, "source": "s"},
                               {"kind": "gemm", "m": 128, "n": 4096, "k": 14336, "dtype": "bf16", "time_us": 52, "source": "s"}])");
  CHECK(rows[0].l2_start == L2Start::dirty);
  CHECK(rows[1].l2_start == L2Start::back_to_back);
  CHECK(predict_us(rows[0], h100()) > predict_us(rows[1], h100()));
  CHECK(measurement_json(rows[0])["l2"] == "dirty");
  CHECK_THAT(error_of(R"([{"kind": "gemm", "m": 1, "n": 1, "k": 1, "dtype": "bf16", "l2": "warm", "time_us": 1, "source": "s"}])"),
             Catch::Matchers::Contains("$.measurements[0].l2: unknown L2 state \"warm\" (back_to_back, clean or dirty)"));
  // Without the L2's description the rows are predicted back to back, and validate says so.
  HardwareSpec no_l2 = h100();
  no_l2.memory.l2_dirty_bytes = 0;
  CHECK(predict_us(rows[0], no_l2) == Approx(predict_us(rows[1], no_l2)));
  CHECK(l2_start_note(rows, no_l2).has_value());
  CHECK_FALSE(l2_start_note(rows, h100()).has_value());

  const std::string gemm = R"("gpus": 1, "dtype": "bf16", "workload": {"op": "matmul", "m": 128, "n": 4096, "k": 14336}})";
  CHECK_THAT(scenario_error(R"({"hardware": "h100_sxm", "software": {"l2": "full"}, )" + gemm),
             Catch::Matchers::Contains("$.software.l2: unknown L2 state \"full\" (back_to_back, clean or dirty)"));
  CHECK_THAT(scenario_error(R"({"hardware": "a100_sxm", "software": {"l2": "dirty"}, )" + gemm),
             Catch::Matchers::Contains("$.software.l2: hardware a100_sxm gives no memory.l2_capacity and l2_dirty_share"));
  CHECK(makespan_us(simulate(R"({"hardware": "h100_sxm", "software": {"l2": "dirty"}, )" + gemm), "baseline") >
        makespan_us(simulate(R"({"hardware": "h100_sxm", )" + gemm), "baseline"));
  CHECK_THAT(scenario_error(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "software": {"l2": "dirty"}, "workload": {"op": "training_step",
             "model": "llama3_8b", "seq_len": 2048, "local_batch": 1, "mesh": {"fsdp": 8}}})"),
             Catch::Matchers::Contains("$.software.l2: a training step's kernels each find what the ones before them left"));
}

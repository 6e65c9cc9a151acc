// One rank of PyTorch's async TP over a group, on one GPU that plays every peer
// (workload.emulated_group): what tools/torch_async_tp_rank_bench.py measures.
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::string emulated(const std::string& op, std::int64_t m, std::int64_t k, std::int64_t n, int group, int gpus = 1,
                     const std::string& variants = "") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16", "software": {{"op_issue": "enqueued"}},
      "workload": {{"op": "{}", "m": {}, "k": {}, "n": {}, "emulated_group": {}}}{}}})",
                     gpus, op, m, k, n, group, variants.empty() ? "" : fmt::format(R"(, "variants": [{}])", variants));
}

}  // namespace

TEST_CASE("An emulated rank runs its group's whole decomposition on one GPU: 2G barriers, G-1 local pulls, G submatmuls, one sum",
          "[strategies][async_tp][emulation]") {
  const int g = 8;
  const auto r = simulate(emulated("matmul_reducescatter", 1024, 14336, 4096, g));
  REQUIRE(r.runs.size() == 2);  // async_tp and async_tp_single_stream: the variants that emulate a rank
  const auto& run = variant(r, "async_tp");
  REQUIRE(run.dag.ranks() == 1);
  int barriers = 0, pulls = 0, gemms = 0, reductions = 0;
  for (OpId id = 0; id < run.dag.size(); ++id) {
    const Op& op = run.dag.op(id);
    barriers += std::holds_alternative<BarrierOp>(op.payload);
    gemms += std::holds_alternative<GemmOp>(op.payload);
    if (const auto* red = std::get_if<ReduceOp>(&op.payload)) reductions += red->inputs == g;
    if (op.name.find(".pull.") != std::string::npos) {
      ++pulls;
      CHECK(std::holds_alternative<ElementwiseOp>(op.payload));  // a same-device copy_, not a copy engine's
    }
    CHECK_FALSE(std::holds_alternative<CopyOp>(op.payload));
  }
  CHECK(barriers == 2 * g);
  CHECK(pulls == g - 1);
  CHECK(gemms == g);
  CHECK(reductions == 1);
  // The shards are the group's: 128 rows of the 1,024.
  for (OpId id = 0; id < run.dag.size(); ++id)
    if (const auto* gemm = std::get_if<GemmOp>(&run.dag.op(id).payload)) CHECK(gemm->problem.m == 1024 / g);
}

TEST_CASE("An emulated rank's time lies between HBM streaming every submatmul's weight and running every piece alone in turn",
          "[strategies][async_tp][emulation]") {
  // Each of the 8 steps re-reads the 117 MB weight (14,336 x 4,096 bf16): HBM bounds the op from
  // below; from above, the pieces one after another with nothing overlapped.
  const int g = 8;
  const std::int64_t m = 1024, k = 14336, n = 4096;
  const double t = makespan_us(simulate(emulated("matmul_reducescatter", m, k, n, g, 1, R"("async_tp")")), "async_tp");
  const HardwareSpec& hw = h100();
  const double stream_us = g * 2.0 * k * n / hw.memory.hbm_bytes_per_ps / 1e6;
  const double chunk = 2.0 * (m / g) * n;
  const double serial = g * gemm_alone_us(m / g, n, k, Dtype::bf16) + (g - 1) * kernel_alone_us(ElementwiseOp{chunk, chunk}) +
                        kernel_alone_us(ReduceOp{g, chunk, ReductionKernel::aten_sum}) + 4.0 * g * to_us(hw.launch.device_latency);
  INFO(fmt::format("emulated {:.1f} us, HBM bound {:.1f} us, serial {:.1f} us", t, stream_us, serial));
  CHECK(t > stream_us);
  CHECK(t < serial);
}

TEST_CASE("An emulated rank is refused where it means nothing, with the key's path", "[strategies][async_tp][emulation]") {
  CHECK_THAT(scenario_error(emulated("allgather_matmul", 1024, 4096, 6656, 8, 8)),
             Catch::Matchers::Contains("$.workload.emulated_group: emulates one rank of a group on one GPU, so \"gpus\" must be 1 (got 8)"));
  CHECK_THAT(scenario_error(emulated("allgather_matmul", 1024, 4096, 6656, 1)),
             Catch::Matchers::Contains("$.workload.emulated_group: must be 2 to 64"));
  CHECK_THAT(scenario_error(emulated("allgather_matmul", 1004, 4096, 6656, 8)),
             Catch::Matchers::Contains("$.workload.m: 1004 rows do not divide evenly over a group of 8"));
  CHECK_THAT(scenario_error(emulated("allgather_matmul", 1024, 4096, 6656, 8, 1, R"("ring")")),
             Catch::Matchers::Contains("$.variants[0]: ring has no emulation of one rank of a group"));
  CHECK_THAT(scenario_error(R"({"hardware": "h100_sxm", "gpus": 1, "dtype": "bf16",
      "workload": {"op": "matmul", "m": 1024, "k": 4096, "n": 4096, "emulated_group": 8}})"),
             Catch::Matchers::Contains("$.workload: unknown key \"emulated_group\""));
}

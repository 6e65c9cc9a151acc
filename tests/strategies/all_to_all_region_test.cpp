// The all-to-all region (expert parallelism inside a TP-sized group): tokens to the
// GPU of their expert, the expert GEMM, and back.
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::string a2a(int gpus, std::int64_t m, std::int64_t k, std::int64_t n, const std::string& hw = "h100_sxm") {
  return fmt::format(R"({{"hardware": "{}", "gpus": {}, "dtype": "bf16", "workload": {{"op": "alltoall_matmul", "m": {}, "k": {}, "n": {}}}}})",
                     hw, gpus, m, k, n);
}

double sent_bytes(const Dag& dag, int rank, const std::string& suffix) {
  double b = 0;
  for (OpId id : dag.program(rank))
    if (const auto* s = std::get_if<SendRecvOp>(&dag.op(id).payload); s && dag.op(id).name.ends_with(suffix))
      for (const Transfer& t : s->sends) b += t.bytes;
  return b;
}

double span_us(const VariantRun& run, const std::string& suffix) {
  for (OpId id : run.dag.program(0))
    if (run.dag.op(id).name.ends_with(suffix)) return op_us(run.timeline, id);
  return -1;
}

}  // namespace

TEST_CASE("An all-to-all sends (G-1)/G of each rank's rows out and the products back", "[strategies][all_to_all_region]") {
  const RunResult r = simulate(a2a(8, 16384, 4096, 14336));
  const Dag& dag = variant(r, "baseline").dag;
  for (int rank = 0; rank < 8; ++rank) {
    CHECK(sent_bytes(dag, rank, ".dispatch") == Approx(7.0 / 8 * 16384 * 4096 * 2));
    CHECK(sent_bytes(dag, rank, ".combine") == Approx(7.0 / 8 * 16384 * 14336 * 2));
  }
  // The expert multiplies the m rows it received (m/G from each of G ranks).
  CHECK(op_flops(dag.op(dag.program(0)[1])) == Approx(2.0 * 16384 * 4096 * 14336));
}

TEST_CASE("An all-to-all on NVSwitch moves at the port's rate, and a port twice as fast halves it until NCCL's blocks bind", "[strategies][all_to_all_region]") {
  const Scenario s = parse_scenario(Json::parse(a2a(8, 65536, 4096, 128)), "");
  const RunResult base = run_scenario(s);
  const double bytes = 7.0 / 8 * 65536 * 4096 * 2;
  const double t = span_us(variant(base, "baseline"), ".dispatch");
  // Each GPU's egress port carries its seven sends at once: bytes / (port x protocol efficiency), plus latency.
  const double port = h100().fabric.nvlink.bytes_per_ps * 1e6;  // bytes per us
  CHECK(t > bytes / port);
  CHECK(t < 1.5 * bytes / port);
  // With NCCL's blocks never binding, a port twice as fast halves it.
  Scenario links = s;
  links.hardware.nccl.p2p.channel_bytes_per_ps = 0;
  Scenario fast = links;
  fast.hardware.fabric.nvlink.bytes_per_ps *= 2;
  const double t_links = span_us(variant(run_scenario(links), "baseline"), ".dispatch");
  const double t_fast = span_us(variant(run_scenario(fast), "baseline"), ".dispatch");
  CHECK(t_links == Approx(t).epsilon(1e-9));  // the port binds on the shipped model
  CHECK(t_fast / t_links == Approx(0.5).epsilon(0.05));
  // With them, no faster than the busiest block: 8 rounds (7 peers and itself) of 64 MiB in
  // 4 parts on 32 channels, each block 16 MiB out and 16 MiB in.
  Scenario blocks = s;
  blocks.hardware.fabric.nvlink.bytes_per_ps *= 2;
  const double t_blocks = span_us(variant(run_scenario(blocks), "baseline"), ".dispatch");
  const double floor_us = 32.0 * 1024 * 1024 / (h100().nccl.p2p.channel_bytes_per_ps * 1e6);
  CHECK(t_blocks > floor_us);
  CHECK(t_blocks < 1.05 * floor_us);
  CHECK(t_blocks > 1.2 * t_fast);
}

TEST_CASE("Only NCCL's all-to-all exists for the expert region, and rows must split evenly", "[strategies][all_to_all_region]") {
  CHECK(parse_scenario(Json::parse(a2a(8, 1024, 512, 512)), "").variants == std::vector<std::string>{"baseline"});
  CHECK_THAT(scenario_error(a2a(8, 1004, 512, 512)), Catch::Matchers::Contains("$.workload.m: 1004 rows do not divide evenly over 8 GPUs"));
}

// Each variant pins the mechanism it exists to show.
#include "support/catch.hpp"

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <fmt/format.h>

#include "support/simulate.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::string scenario(const std::string& op, std::int64_t m, std::int64_t k, const std::string& n, int gpus,
                     const std::string& variants, const std::string& hw = "h100_sxm", const std::string& dtype = "bf16") {
  return fmt::format(R"({{"hardware": "{}", "gpus": {}, "dtype": "{}",
      "workload": {{"op": "{}", "m": {}, "k": {}, "n": {}}}, "variants": [{}]}})",
                     hw, gpus, dtype, op, m, k, n, variants);
}

int count_ops(const VariantRun& run, int rank, const std::function<bool(const Op&)>& pred) {
  int c = 0;
  for (OpId id = 0; id < run.dag.size(); ++id)
    if (run.dag.op(id).rank == rank && pred(run.dag.op(id))) ++c;
  return c;
}

// A hardware file on disk: h100_sxm rewired as a ring of NVLinks.
std::string ring_hardware() {
  // One file per process: ctest runs the test cases that use it in parallel.
  const auto path = std::filesystem::temp_directory_path() / fmt::format("tpsim_test_ring_hw_{}.json", ::getpid());
  std::ofstream(path) << R"({"name": "h100_ring", "base": "h100_sxm", "fabric": {"topology": "ring"}})";
  return path.string();
}

// The same, with NCCL's send/recv blocks as fast as anything (the links alone set the pace).
std::string ring_links_only_hardware() {
  const auto path = std::filesystem::temp_directory_path() / fmt::format("tpsim_test_ring_links_hw_{}.json", ::getpid());
  std::ofstream(path) << R"({"name": "h100_ring_links", "base": "h100_sxm", "fabric": {"topology": "ring"},
      "nccl": {"p2p": {"channel_bandwidth": {"value": 100000, "unit": "GB/s", "source": "test: blocks never bind"}}}})";
  return path.string();
}

}  // namespace

TEST_CASE("NCCL send/recv kernels hold SMs: a one-wave GEMM beside one needs a second wave", "[variants][async_tp_nccl]") {
  // 1536 x 2816 with 128x256 tiles = 12 x 11 = 132 tiles: exactly one wave on a free GPU.
  const GemmOp gemm{{1536, 2816, 8192, Dtype::bf16}};
  Dag dag(2);
  const int group = dag.new_group();
  OpId g0 = 0;
  for (int r = 0; r < 2; ++r) {
    dag.add(r, 1, "sendrecv", SendRecvOp{{Transfer{1 - r, 4e9}}, group});  // launched first, long
    const OpId g = dag.add(r, 0, "gemm", gemm);
    if (r == 0) g0 = g;
  }
  const double contended = op_us(execute(dag, h100()), g0);
  const double alone = gemm_alone_us(1536, 2816, 8192, Dtype::bf16);
  CHECK(contended / alone == Approx(2.0).epsilon(0.06));
}

TEST_CASE("async_tp_nccl loses to copy-engine async TP when its kernels steal SMs", "[variants][async_tp_nccl]") {
  const auto r = simulate(scenario("allgather_matmul", 8 * 1536, 8192, "2816", 8, R"("async_tp", "async_tp_nccl")"));
  CHECK(makespan_us(r, "async_tp_nccl") > 1.1 * makespan_us(r, "async_tp"));
}

TEST_CASE("The ring passes shards only to the next rank, one hop per step", "[variants][ring]") {
  const auto r = simulate(scenario("allgather_matmul", 8192, 4096, "4096", 8, R"("ring")"));
  const auto& run = variant(r, "ring");
  for (OpId id = 0; id < run.dag.size(); ++id)
    if (const auto* s = std::get_if<SendRecvOp>(&run.dag.op(id).payload)) {
      REQUIRE(s->sends.size() == 1);
      CHECK(s->sends[0].peer == (run.dag.op(id).rank + 1) % 8);
    }
  CHECK(count_ops(run, 0, [](const Op& op) { return std::holds_alternative<SendRecvOp>(op.payload); }) == 7);
  CHECK(count_ops(run, 0, [](const Op& op) { return std::holds_alternative<GemmOp>(op.payload); }) == 8);
}

TEST_CASE("Bidirectional rings halve the steps, and on a ring of links they double the bandwidth", "[variants][ring]") {
  const auto r = simulate(scenario("allgather_matmul", 8192, 4096, "4096", 8, R"("ring", "ring_bidirectional")"));
  const auto sendrecvs = [](const Op& op) { return std::holds_alternative<SendRecvOp>(op.payload); };
  CHECK(count_ops(variant(r, "ring_bidirectional"), 0, sendrecvs) == 4);  // ceil(7 / 2)
  CHECK(count_ops(variant(r, "ring"), 0, sendrecvs) == 7);
  // Communication-bound (small K... large rows of A per FLOP): on a ring of NVLinks
  // both directions carry data at once.
  const auto comm_bound = simulate(scenario("allgather_matmul", 65536, 8192, "256", 8, R"("ring", "ring_bidirectional")", ring_links_only_hardware()));
  CHECK(makespan_us(comm_bound, "ring_bidirectional") < 0.75 * makespan_us(comm_bound, "ring"));
}

TEST_CASE("The feature-split bidirectional scatter sends half the accumulator each way", "[variants][ring]") {
  const auto r = simulate(scenario("matmul_reducescatter", 8192, 4096, "4096", 4, R"("ring_bidirectional")"));
  const auto& run = variant(r, "ring_bidirectional");
  for (OpId id = 0; id < run.dag.size(); ++id)
    if (const auto* s = std::get_if<SendRecvOp>(&run.dag.op(id).payload)) {
      REQUIRE(s->sends.size() == 2);
      CHECK(s->sends[0].bytes == Approx(2048.0 * 4096 * 2 / 2));
    }
}

TEST_CASE("On a ring of links, neighbour-only rings beat async TP's pulls from far peers, unless NCCL's few blocks bind", "[variants][ring]") {
  const auto links = simulate(scenario("allgather_matmul", 65536, 8192, "1024", 8, R"("async_tp", "ring")", ring_links_only_hardware()));
  CHECK(makespan_us(links, "ring") < makespan_us(links, "async_tp"));
  // NCCL plans a send/recv in an 8-rank communicator on 32 / 8 = 4 channels: the ring's
  // 16 MiB steps take 4 blocks, each moving 4 MiB out and 4 MiB in, and those bind.
  const auto blocks = simulate(scenario("allgather_matmul", 65536, 8192, "1024", 8, R"("async_tp", "ring")", ring_hardware()));
  CHECK(makespan_us(blocks, "ring") > makespan_us(blocks, "async_tp"));
  CHECK(makespan_us(blocks, "ring") > 1.5 * makespan_us(links, "ring"));
}

TEST_CASE("The fused kernel reproduces seed 002's table (2/4/8 GPUs: 102/212/436 us) within 15%", "[variants][fused][published]") {
  for (auto [gpus, us] : std::vector<std::pair<int, double>>{{2, 102}, {4, 212}, {8, 436}}) {
    const auto r = simulate(scenario("allgather_matmul", 1024 * gpus, 4096, "4096", gpus, R"("fused")", "h100_sxm", "fp16"));
    INFO(fmt::format("{} GPUs: predicted {:.1f} us, measured {} us", gpus, makespan_us(r, "fused"), us));
    CHECK(makespan_us(r, "fused") == Approx(us).epsilon(0.15));
  }
}

TEST_CASE("The fused kernel pays one sync round per step: G local matmuls plus G-1 rounds", "[variants][fused]") {
  const auto r4 = simulate(scenario("allgather_matmul", 4096, 4096, "4096", 4, R"("fused")", "h100_sxm", "fp16"));
  const auto r8 = simulate(scenario("allgather_matmul", 8192, 4096, "4096", 8, R"("fused")", "h100_sxm", "fp16"));
  const double local = gemm_alone_us(1024, 4096, 4096, Dtype::fp16) - to_us(h100().gemm.kernel_ramp);
  const double per_step = (makespan_us(r8, "fused") - makespan_us(r4, "fused")) / 4;
  CHECK(per_step == Approx(local + to_us(h100().barrier.latency)).epsilon(0.03));
}

TEST_CASE("One all-gather feeds several matmuls (Q, K, V)", "[variants][multi_n]") {
  const auto r = simulate(scenario("allgather_matmul", 8192, 4096, "[4096, 1024, 1024]", 8, R"("baseline", "async_tp", "ring")"));
  const auto collectives = [](const Op& op) { return std::holds_alternative<CollectiveOp>(op.payload); };
  const auto gemms = [](const Op& op) { return std::holds_alternative<GemmOp>(op.payload); };
  CHECK(count_ops(variant(r, "baseline"), 0, collectives) == 1);
  CHECK(count_ops(variant(r, "baseline"), 0, gemms) == 3);
  CHECK(count_ops(variant(r, "async_tp"), 0, gemms) == 3 * 8);
  CHECK(count_ops(variant(r, "ring"), 0, gemms) == 3 * 8);
  // The same FLOPs as one 6144-wide weight.
  const auto one = simulate(scenario("allgather_matmul", 8192, 4096, "6144", 8, R"("baseline")"));
  CHECK(variant(r, "baseline").metrics.flops == Approx(variant(one, "baseline").metrics.flops));
}

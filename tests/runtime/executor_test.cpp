#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/cost/gemm_cost.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {
const GemmOp kGemm{{2048, 4096, 4096, Dtype::bf16}};
}

TEST_CASE("Ops on one stream run in order, each after the device launch latency", "[runtime]") {
  Dag dag(1);
  const OpId a = dag.add(0, 0, "a", kGemm);
  const OpId b = dag.add(0, 0, "b", kGemm);
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[b].ready == tl.ops[a].end);
  CHECK(tl.ops[b].start == tl.ops[a].end + h100().launch.device_latency);
}

TEST_CASE("The host pays a launch overhead per op, so the first op starts after it", "[runtime]") {
  Dag dag(1);
  const OpId a = dag.add(0, 0, "a", kGemm);
  const OpId b = dag.add(0, 1, "b", kGemm);
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[a].issued == h100().launch.host_overhead);
  CHECK(tl.ops[b].issued == 2 * h100().launch.host_overhead);
  CHECK(tl.ops[a].start == tl.ops[a].issued + h100().launch.device_latency);
}

TEST_CASE("A wait holds its stream until the recorded op is done", "[runtime]") {
  Dag dag(1);
  const OpId slow = dag.add(0, 0, "slow", GemmOp{{8192, 8192, 8192, Dtype::bf16}});
  dag.join(0, 0, 1, "sync");
  const OpId after = dag.add(0, 1, "after", kGemm);
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[after].start >= tl.ops[slow].end);
}

TEST_CASE("A kernel behind another stream's event starts later than one behind its own stream's kernel", "[runtime]") {
  // Measured: 1.57 us between tiny kernels alternating streams through events, 1.28 on one stream.
  const Tick cross = h100().launch.cross_stream_latency;
  REQUIRE(cross > 0);
  Dag dag(1);
  const OpId first = dag.add(0, 0, "first", kGemm);
  dag.join(0, 0, 1, "sync");
  const OpId joined = dag.add(0, 1, "joined", kGemm);
  const OpId queued = dag.add(0, 1, "queued", kGemm);  // same stream, no wait: the plain gap
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[joined].start == tl.ops[first].end + h100().launch.device_latency + cross);
  CHECK(tl.ops[queued].start == tl.ops[joined].end + h100().launch.device_latency);
  // Replayed from a CUDA graph, the join's own cost is not measured: the graph's gap alone.
  dag.set_host_issue(HostIssue::cuda_graph);
  const Timeline graph = execute(dag, h100());
  CHECK(graph.ops[joined].start == graph.ops[first].end + h100().launch.graph_device_latency);
}

TEST_CASE("Kernels on two streams run concurrently", "[runtime]") {
  Dag dag(1);
  // 64 tiles each (128x256): together they fit in one wave.
  const OpId a = dag.add(0, 0, "a", GemmOp{{1024, 2048, 4096, Dtype::bf16}});
  const OpId b = dag.add(0, 1, "b", GemmOp{{1024, 2048, 4096, Dtype::bf16}});
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[b].start < tl.ops[a].end);
}

TEST_CASE("A barrier releases every rank only after the last one arrives", "[runtime]") {
  Dag dag(2);
  const int g = dag.new_group();
  const OpId work = dag.add(1, 0, "slow", GemmOp{{8192, 8192, 8192, Dtype::bf16}});
  const OpId b0 = dag.add(0, 0, "barrier", BarrierOp{g});
  const OpId b1 = dag.add(1, 0, "barrier", BarrierOp{g});
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[b0].end == tl.ops[b1].end);
  CHECK(tl.ops[b0].end >= tl.ops[work].end + h100().barrier.latency);
}

TEST_CASE("Peer copies from two streams queue on the one P2P copy engine", "[runtime]") {
  Dag dag(3);
  const OpId a = dag.add(0, 0, "a", CopyOp{1, 0, 100e6});
  const OpId b = dag.add(0, 1, "b", CopyOp{2, 0, 100e6});
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[b].start >= tl.ops[a].end);
  CHECK(op_us(tl, b) == Approx(op_us(tl, a)).epsilon(0.01));
}

TEST_CASE("A barrier that one rank never reaches ends with a clear error, not a hang", "[runtime]") {
  Dag dag(2);
  const int g = dag.new_group();
  dag.add(0, 0, "lonely barrier", BarrierOp{g});
  dag.add(1, 0, "other work", kGemm);
  CHECK_THROWS_WITH(execute(dag, h100()), Catch::Matchers::Contains("rank 0 stream 0 at 'lonely barrier'"));
}

namespace {

// A 64-row GEMM against a 58.7 MB weight (HBM-bound) on GPU 0, alone and beside a
// copy engine writing `copy_bytes` from GPU 1 into the same HBM: {alone, busy} in us.
std::pair<double, double> skinny_gemm_alone_and_beside_copy(double copy_bytes) {
  const GemmOp skinny{{64, 3584, 8192, Dtype::bf16}};
  Dag alone(2);
  const OpId a = alone.add(0, 0, "gemm", skinny);
  Dag busy(2);
  busy.add(0, 1, "copy", CopyOp{1, 0, copy_bytes});
  const OpId b = busy.add(0, 0, "gemm", skinny);
  return {op_us(execute(alone, h100()), a), op_us(execute(busy, h100()), b)};
}

}  // namespace

TEST_CASE("Peer traffic into a GPU takes HBM bandwidth from its memory-bound kernels", "[runtime][hbm]") {
  // The copy writes ~396 GB/s into the GEMM's HBM for as long as the GEMM runs.
  const auto [t_alone, t_busy] = skinny_gemm_alone_and_beside_copy(2e9);
  const double hbm = h100().memory.hbm_bytes_per_ps, link = h100().fabric.nvlink.bytes_per_ps;
  CHECK(t_busy / t_alone == Approx(hbm / (hbm - link)).epsilon(0.03));
}

TEST_CASE("A kernel slowed by a copy speeds up again when the copy ends (HBM is re-timed, not sampled)", "[runtime][hbm]") {
  // The copy is short next to the memory-bound GEMM: only the overlap pays.
  const auto [t_alone, t_busy] = skinny_gemm_alone_and_beside_copy(5e6);
  const double hbm = h100().memory.hbm_bytes_per_ps, link = h100().fabric.nvlink.bytes_per_ps;
  CHECK(t_busy > t_alone);
  CHECK(t_busy < 0.5 * (t_alone + t_alone * hbm / (hbm - link)));  // far from paying the copy's share throughout
}

TEST_CASE("Two memory-bound kernels on two streams never move their bytes faster than HBM", "[runtime][hbm]") {
  Dag dag(1);
  const ElementwiseOp big{4e9, 4e9};
  const OpId a = dag.add(0, 0, "a", big);
  const OpId b = dag.add(0, 1, "b", big);
  const Timeline tl = execute(dag, h100());
  const Tick start = std::min(tl.ops[a].start, tl.ops[b].start), end = std::max(tl.ops[a].end, tl.ops[b].end);
  const double bytes = 2 * (big.bytes_read + big.bytes_written);
  CHECK(bytes / static_cast<double>(end - start) <= h100().memory.hbm_bytes_per_ps * (1 + 1e-9));
  CHECK(bytes / static_cast<double>(end - start) > 0.97 * h100().memory.hbm_bytes_per_ps);  // and leave none of it idle
}

TEST_CASE("Links faster than HBM carry no more than HBM can read and write", "[runtime][hbm]") {
  HardwareSpec fast = h100();
  fast.fabric.nvlink.bytes_per_ps = 4 * fast.memory.hbm_bytes_per_ps;
  fast.copy_engines.bytes_per_ps = 8 * fast.memory.hbm_bytes_per_ps;
  Dag dag(2);
  const OpId c = dag.add(0, 0, "copy", CopyOp{0, 1, 4e9});
  const Timeline tl = execute(dag, fast);
  CHECK(4e9 / static_cast<double>(tl.ops[c].end - tl.ops[c].start) <= fast.memory.hbm_bytes_per_ps * (1 + 1e-6));
}

TEST_CASE("How ops are issued: eager PyTorch makes the host the critical path for short ops, a CUDA graph takes it off", "[runtime][host]") {
  const auto run = [](HostIssue how) {
    Dag dag(1);
    dag.set_host_issue(how);
    for (int i = 0; i < 50; ++i) dag.add(0, 0, "tiny", ElementwiseOp{1024, 1024});
    const Timeline tl = execute(dag, h100());
    return std::make_pair(to_us(tl.ops[dag.size() - 1].end), analyze(dag, tl));
  };
  const auto [eager, eager_m] = run(HostIssue::eager);
  const auto [compiled, compiled_m] = run(HostIssue::compiled);
  const auto [graph, graph_m] = run(HostIssue::cuda_graph);
  INFO("eager " << eager << " us, compiled " << compiled << " us, graph " << graph << " us");
  // Eager: the host issues one op every eager_op_overhead and the GPU waits for it.
  CHECK(eager == Approx(50 * to_us(h100().launch.eager_op_overhead)).epsilon(0.05));
  CHECK(eager_m.critical_path.by_kind.at("host") > 0.8 * eager_m.critical_path.by_kind.at("elementwise"));
  CHECK(compiled < eager);
  CHECK(graph < compiled);
  // A graph costs the host one launch, not one per op.
  CHECK((graph_m.critical_path.by_kind.count("host") == 0 ||
         graph_m.critical_path.by_kind.at("host") <= h100().launch.host_overhead + ticks_from_us(0.1)));
  // Enqueued before the GPU got there: no host time at all, but every kernel still pays
  // a stream launch's device latency, which a graph shortens.
  const auto [enqueued, enqueued_m] = run(HostIssue::enqueued);
  INFO("enqueued " << enqueued << " us");
  CHECK(enqueued_m.critical_path.by_kind.count("host") == 0);
  CHECK(enqueued < compiled);
  CHECK(enqueued > graph);
}

TEST_CASE("A persistent fused kernel draws from the same HBM as a kernel beside it: together never more than HBM gives", "[runtime][hbm]") {
  // A fused ring GEMM on half the SMs (a thin step: one 64-row band of tiles, weight-bound)
  // and a memory-bound kernel on another stream of the same GPU.
  GemmProblem step{64, 8448, 16384, Dtype::bf16};
  step.by_library = false;  // as the runtime plans a fused kernel's step
  const GemmPlan plan = plan_gemm(step, h100());
  REQUIRE(plan.blocks < h100().sm.count);  // leaves SMs for the neighbour
  const auto run = [&](bool neighbour) {
    Dag dag(2);
    const int g = dag.new_group();
    const OpId fused = dag.add(0, 0, "fused", FusedRingGemmOp{step, 2, 1, 1e6, g});
    dag.add(1, 0, "fused", FusedRingGemmOp{step, 2, 0, 1e6, g});
    const OpId copy = neighbour ? dag.add(0, 1, "copy", ElementwiseOp{2e9, 2e9}) : fused;
    const Timeline tl = execute(dag, h100());
    return std::make_tuple(tl.ops[fused].start, tl.ops[fused].end, tl.ops[copy].start, tl.ops[copy].end);
  };
  const auto [alone_start, alone_end, unused_start, unused_end] = run(false);
  const auto [f_start, f_end, c_start, c_end] = run(true);
  // Over the time both ran, their bytes fit in what HBM can give.
  const double fused_bytes = 2 * plan.hbm_bytes;  // two steps
  const Tick both_start = std::max(f_start, c_start), both_end = std::min(f_end, c_end);
  REQUIRE(both_end > both_start);
  const double span = static_cast<double>(std::max(f_end, c_end) - std::min(f_start, c_start));
  CHECK((fused_bytes + 4e9) / span <= h100().memory.hbm_bytes_per_ps * (1 + 1e-6));
  // And the fused kernel is slowed by its neighbour, as any GEMM beside it would be.
  CHECK(f_end - f_start > alone_end - alone_start);
}

namespace {

// A 1 MiB copy on stream 1 launched behind a thin, deep GEMM on stream 0 whose blocks hold
// all but a few SMs (the split-K submatmul of async TP's reduce-scatter): the copy's device
// time, squeezed and alone, with `extra` added to the copy kernel's start-up.
std::pair<double, double> copy_squeezed_and_alone_us(Tick extra) {
  HardwareSpec hw = h100();
  hw.elementwise.block_overhead += extra;
  const ElementwiseOp copy{1 << 20, 1 << 20};
  Dag dag(1);
  dag.add(0, 0, "gemm", GemmOp{{64, 4096, 4 * 14336, Dtype::bf16}});
  const OpId squeezed = dag.add(0, 1, "copy", copy);
  return {op_us(execute(dag, hw), squeezed), kernel_alone_us(copy, hw)};
}

}  // namespace

TEST_CASE("A copy squeezed onto the SMs a GEMM leaves makes its blocks' first round trip once per round of blocks",
          "[runtime]") {
  const HardwareSpec& hw = h100();
  const GemmPlan gemm = plan_gemm(GemmProblem{64, 4096, 4 * 14336, Dtype::bf16}, hw);
  const std::int64_t free_sms = hw.sm.count - gemm.blocks;  // a GEMM block takes a whole SM
  REQUIRE(free_sms > 0);
  REQUIRE(free_sms <= 8);
  const std::int64_t per_sm = hw.sm.capacity.threads / hw.elementwise.block.threads;
  const std::int64_t blocks = plan_elementwise(2 << 20, hw).blocks;
  const std::int64_t rounds = (blocks + free_sms * per_sm - 1) / (free_sms * per_sm);
  REQUIRE(rounds >= 4);
  const auto [squeezed, alone] = copy_squeezed_and_alone_us(0);
  INFO("squeezed " << squeezed << " us, alone " << alone << " us, " << rounds << " rounds");
  CHECK(squeezed >= static_cast<double>(rounds) * to_us(hw.elementwise.block_overhead));
  CHECK(squeezed > 3 * alone);
  // A slower start-up: once more alone (its blocks go out together), once more per round squeezed.
  const auto [squeezed_slow, alone_slow] = copy_squeezed_and_alone_us(ticks_from_us(1));
  CHECK(alone_slow - alone == Approx(1.0).margin(0.01));
  CHECK(squeezed_slow - squeezed == Approx(static_cast<double>(rounds)).margin(1.0));
}

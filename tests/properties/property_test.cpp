// Properties over random DAGs and random hardware: the run's invariants hold
// (execute checks them), and physics is monotone where it must be.
#include "support/catch.hpp"

#include <random>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/hw/fabric.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

HardwareSpec random_hardware(std::mt19937& rng) {
  std::uniform_real_distribution<double> scale(0.3, 3.0);
  HardwareSpec hw = h100();
  hw.sm.count = std::uniform_int_distribution<int>(8, 148)(rng);
  hw.fabric.nvlink.bytes_per_ps *= scale(rng);
  hw.memory.hbm_bytes_per_ps *= scale(rng);
  hw.copy_engines.bytes_per_ps *= scale(rng);
  hw.copy_engines.p2p_engines = std::uniform_int_distribution<int>(1, 3)(rng);
  hw.launch.device_latency = static_cast<Tick>(static_cast<double>(hw.launch.device_latency) * scale(rng));
  hw.barrier.latency = static_cast<Tick>(static_cast<double>(hw.barrier.latency) * scale(rng));
  for (auto& t : hw.gemm.tiles) t.mainloop_efficiency = std::min(1.0, t.mainloop_efficiency * std::uniform_real_distribution<double>(0.5, 1.2)(rng));
  return hw;
}

// Per rank: random GEMMs, memory kernels, peer copies and cross-stream joins on up
// to three streams; rendezvous ops (barriers, collectives, send/recv) at the same
// program positions on every rank, so the DAG can always finish.
// `transfers` = false keeps only compute, memory kernels, joins and barriers;
// `streams` = 1 puts each rank's work on one in-order stream.
Dag random_dag(std::mt19937& rng, int ranks, bool transfers = true, int streams = 3) {
  std::uniform_int_distribution<int> pick(0, 99);
  const auto dim = [&] { return std::int64_t{64} * std::uniform_int_distribution<int>(1, 48)(rng); };
  const int length = std::uniform_int_distribution<int>(4, 24)(rng);
  std::vector<int> rendezvous_at;  // -1: local op at this position; else the kind of group op
  for (int i = 0; i < length; ++i) rendezvous_at.push_back(pick(rng) < 20 ? (transfers ? pick(rng) % 3 : 0) : -1);
  Dag dag(ranks);
  std::vector<int> groups;
  for (int kind : rendezvous_at) groups.push_back(kind >= 0 ? dag.new_group() : -1);
  std::vector<std::mt19937> per_rank;
  for (int r = 0; r < ranks; ++r) per_rank.emplace_back(rng());
  for (int r = 0; r < ranks; ++r) {
    auto& g = per_rank[static_cast<std::size_t>(r)];
    std::uniform_int_distribution<int> p(0, 99);
    for (int i = 0; i < length; ++i) {
      const std::string name = fmt::format("op{}", i);
      switch (rendezvous_at[static_cast<std::size_t>(i)]) {
        case 0: dag.add(r, 0, name, BarrierOp{groups[static_cast<std::size_t>(i)]}); continue;
        case 1: dag.add(r, 0, name, CollectiveOp{CollectiveKind::all_gather, 1e5 * (1 + i), groups[static_cast<std::size_t>(i)]}); continue;
        case 2: dag.add(r, 0, name, SendRecvOp{{Transfer{(r + 1) % ranks, 1e5 * (1 + i)}}, groups[static_cast<std::size_t>(i)]}); continue;
        default: break;
      }
      const int stream = p(g) % streams;
      const int what = p(g);
      if (what < 40) dag.add(r, stream, name, GemmOp{{dim(), dim(), dim(), Dtype::bf16}});
      else if (what < 60) dag.add(r, stream, name, ElementwiseOp{1e5 * (1 + p(g)), 1e5 * (1 + p(g))});
      else if (what < 85 && transfers) dag.add(r, stream, name, CopyOp{(r + 1 + p(g) % (ranks - 1)) % ranks, r, 1e5 * (1 + p(g))});
      else if (what < 85) dag.add(r, stream, name, ElementwiseOp{1e5, 1e5 * (1 + p(g))});
      else if (streams > 1) dag.join(r, stream, (stream + 1) % streams, name);
      else dag.add(r, stream, name, ElementwiseOp{1e5, 1e5});
    }
  }
  return dag;
}

}  // namespace

TEST_CASE("Random DAGs on random hardware always finish with every invariant intact", "[property]") {
  std::mt19937 rng(20261122);
  for (int trial = 0; trial < 60; ++trial) {
    const int ranks = 2 << (trial % 3);
    const HardwareSpec hw = random_hardware(rng);
    const Dag dag = random_dag(rng, ranks);
    INFO(fmt::format("trial {}: {} ranks, {} ops, {} SMs", trial, ranks, dag.size(), hw.sm.count));
    Timeline tl;
    REQUIRE_NOTHROW(tl = execute(dag, hw));
    for (OpId id = 0; id < dag.size(); ++id) CHECK(tl.ops[id].finished());
  }
}

TEST_CASE("More link bandwidth never makes a transfer slower", "[property]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::tuple<Tick, int, int, double>> transfers;
    for (int i = 0; i < 24; ++i) {
      const int src = static_cast<int>(rng() % 8), dst = static_cast<int>((src + 1 + rng() % 7) % 8);
      transfers.emplace_back(static_cast<Tick>(rng() % 20'000'000), src, dst, 1e5 * (1 + rng() % 100));
    }
    auto finish_times = [&](double bandwidth) {
      Simulator sim;
      FabricSpec spec;
      spec.topology = "switch";
      spec.nvlink = {bandwidth, 800'000};
      Fabric f(sim, Topology(spec, 8));
      std::vector<Tick> done(transfers.size(), -1);
      for (std::size_t i = 0; i < transfers.size(); ++i) {
        const auto [at, src, dst, bytes] = transfers[i];
        sim.schedule_at(at, [&, i, src = src, dst = dst, bytes = bytes] { f.start(src, dst, bytes, 0, [&, i] { done[i] = sim.now(); }); });
      }
      sim.run();
      return done;
    };
    const auto slow = finish_times(0.2), fast = finish_times(0.3);
    for (std::size_t i = 0; i < slow.size(); ++i) CHECK(fast[i] <= slow[i]);
  }
}

TEST_CASE("More SMs never make a GEMM slower", "[property]") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const std::int64_t m = 64 * (1 + rng() % 128), n = 64 * (1 + rng() % 128), k = 64 * (1 + rng() % 128);
    HardwareSpec hw = h100();
    double previous = 1e300;
    for (int sms = 16; sms <= 160; sms += 8) {
      // An added SM brings its own tensor cores: the per-SM rate stays, HBM does not grow.
      for (auto& p : hw.peak_flops_per_ps) p = p / hw.sm.count * sms;
      hw.sm.count = sms;
      const double t = gemm_alone_us(m, n, k, Dtype::bf16, hw);
      INFO(fmt::format("{}x{}x{} on {} SMs: {:.3f} us (fewer SMs: {:.3f})", m, n, k, sms, t, previous));
      // HBM re-timing rounds each stream's end up to a whole picosecond: allow 10 ps.
      CHECK(t <= previous * (1 + 1e-9) + 1e-5);
      previous = t;
    }
  }
}

// In general this does not hold, and should not (both found by this test on
// random DAGs): an extra op that delays a transfer frees link bandwidth for
// another transfer, which finishes earlier; and with several streams per rank
// the greedy, non-preemptive block scheduler shows Graham's anomaly (the extra
// kernel delays one kernel and a later one slips into the SMs it left). Both
// happen on real GPUs. With each rank's work on one in-order stream, and the
// extra op competing only for SMs and HBM, more work never helps anyone.
TEST_CASE("Adding an independent op never makes another op finish earlier (one stream per rank)", "[property]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const HardwareSpec hw = random_hardware(rng);
    std::mt19937 dag_rng(static_cast<std::uint32_t>(trial) * 7919u);
    std::mt19937 same = dag_rng;
    const Dag base = random_dag(dag_rng, 4, false, 1);
    Dag more = random_dag(same, 4, false, 1);
    const int extra_rank = static_cast<int>(rng() % 4);
    const bool extra_gemm = rng() % 2 == 0;
    more.add(extra_rank, 3, "extra", extra_gemm ? OpPayload{GemmOp{{2048, 2048, 2048, Dtype::bf16}}} : OpPayload{ElementwiseOp{5e7, 5e7}});
    const Timeline a = execute(base, hw), b = execute(more, hw);
    for (OpId id = 0; id < base.size(); ++id) {
      INFO(fmt::format("trial {}: rank {} '{}'", trial, base.op(id).rank, base.op(id).name));
      CHECK(b.ops[id].end >= a.ops[id].end);
    }
  }
}

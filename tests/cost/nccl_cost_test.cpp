#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/cost/nccl_cost.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {
const double kLink = h100().fabric.nvlink.bytes_per_ps;
}

TEST_CASE("NCCL picks a low-latency protocol for small messages and Simple for large ones", "[cost][nccl]") {
  CHECK(plan_ring(CollectiveKind::all_gather, 64e3, 8, h100(), kLink).protocol->name == "LL");
  CHECK(plan_ring(CollectiveKind::all_gather, 1e9, 8, h100(), kLink).protocol->name == "Simple");
}

TEST_CASE("Ring latency grows by one hop per extra rank", "[cost][nccl]") {
  const auto p4 = plan_ring(CollectiveKind::all_gather, 1e9, 4, h100(), kLink);
  const auto p8 = plan_ring(CollectiveKind::all_gather, 1e9, 8, h100(), kLink);
  REQUIRE(p4.protocol == p8.protocol);
  CHECK(p8.latency - p4.latency == 4 * p8.protocol->step_latency);
  // Each rank sends (n-1)/n of the buffer.
  CHECK(p4.bytes_per_rank == Approx(0.75e9));
  CHECK(p8.bytes_per_rank == Approx(0.875e9));
}

TEST_CASE("A ring all-reduce is a reduce-scatter then an all-gather: twice the bytes and twice the hops", "[cost][nccl]") {
  for (int n : {2, 4, 8}) {
    INFO(n);
    const auto rs = plan_ring(CollectiveKind::reduce_scatter, 1e9, n, h100(), kLink);
    const auto ar = plan_ring(CollectiveKind::all_reduce, 1e9, n, h100(), kLink);
    REQUIRE(rs.protocol == ar.protocol);
    CHECK(ar.bytes_per_rank == Approx(2 * rs.bytes_per_rank));
    CHECK(ar.latency - rs.latency == (n - 1) * ar.protocol->step_latency);
  }
  // Simulated: an all-reduce takes as long as a reduce-scatter and an all-gather of the same
  // buffer back to back, less one startup (one kernel, not two).
  // (Without NVLS, which would take the all-reduce.)
  const double bytes = 256e6;
  HardwareSpec rings_only = h100();
  rings_only.nccl.nvls = {};
  const auto one = [&](CollectiveKind kind) {
    Dag dag(8);
    const int g = dag.new_group();
    for (int r = 0; r < 8; ++r) dag.add(r, 0, "c", CollectiveOp{kind, bytes, g});
    return op_us(execute(dag, rings_only), 0);
  };
  const double startup = to_us(h100().nccl.ring_startup + plan_ring(CollectiveKind::all_reduce, bytes, 8, h100(), kLink).protocol->base_latency);
  CHECK(one(CollectiveKind::all_reduce) ==
        Approx(one(CollectiveKind::reduce_scatter) + one(CollectiveKind::all_gather) - startup).epsilon(0.01));
}

TEST_CASE("NCCL uses fewer channels (SMs) for small messages", "[cost][nccl]") {
  const auto small = plan_ring(CollectiveKind::all_gather, 100e3, 8, h100(), kLink);
  const auto large = plan_ring(CollectiveKind::all_gather, 100e6, 8, h100(), kLink);
  CHECK(small.channels < large.channels);
  CHECK(large.channels == h100().nccl.max_channels);
}

TEST_CASE("A ring collective's bandwidth term halves when the link doubles", "[cost][nccl]") {
  HardwareSpec fast = h100();
  fast.fabric.nvlink.bytes_per_ps *= 2;
  const double bytes = 4e9;
  auto run = [&](const HardwareSpec& hw) {
    Dag dag(8);
    const int g = dag.new_group();
    OpId first = 0;
    for (int r = 0; r < 8; ++r) {
      const OpId id = dag.add(r, 0, "ag", CollectiveOp{CollectiveKind::all_gather, bytes, g});
      if (r == 0) first = id;
    }
    return op_us(execute(dag, hw), first);
  };
  const double latency_us = to_us(plan_ring(CollectiveKind::all_gather, bytes, 8, h100(), kLink).latency);
  CHECK((run(fast) - latency_us) / (run(h100()) - latency_us) == Approx(0.5).epsilon(0.01));
}

TEST_CASE("An elementwise kernel is HBM-bound: half the bandwidth, twice the time", "[cost][elementwise]") {
  HardwareSpec slow = h100();
  slow.memory.hbm_bytes_per_ps /= 2;
  const auto plan = plan_elementwise(1e9, h100());
  const int all = static_cast<int>(plan.blocks);
  const Tick fast_t = elementwise_block_work(plan, h100()).time_at(h100().memory.hbm_bytes_per_ps / all) - h100().elementwise.block_overhead;
  const Tick slow_t = elementwise_block_work(plan, slow).time_at(slow.memory.hbm_bytes_per_ps / all) - slow.elementwise.block_overhead;
  CHECK(static_cast<double>(slow_t) / static_cast<double>(fast_t) == Approx(2.0).epsilon(0.001));
  // 1 GB moved at ~3 TB/s: about 333 us end to end on the whole GPU.
  Dag dag(1);
  const OpId id = dag.add(0, 0, "copy", ElementwiseOp{0.5e9, 0.5e9});
  CHECK(op_us(execute(dag, h100()), id) == Approx(1e9 / h100().memory.hbm_bytes_per_ps / 1e6).epsilon(0.05));
}

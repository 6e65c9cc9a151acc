#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/nccl_cost.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {
const double kLink = h100().fabric.nvlink.bytes_per_ps;

// One collective over all `gpus` GPUs of `hw`, simulated: the timeline and rank 0's op.
std::pair<Timeline, OpId> world_collective(CollectiveKind kind, double bytes, int gpus, const HardwareSpec& hw) {
  Dag dag(gpus);
  const int g = dag.new_group();
  OpId first = 0;
  for (int r = 0; r < gpus; ++r) {
    const OpId id = dag.add(r, 0, "c", CollectiveOp{kind, bytes, g});
    if (r == 0) first = id;
  }
  return {execute(dag, hw), first};
}
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
  const NcclProtocol& proto = *plan_ring(CollectiveKind::all_reduce, bytes, 8, h100(), kLink).protocol;
  const double startup = to_us(nccl_ring_startup(proto, h100().nccl) + proto.base_latency);
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
  // The links alone: without the blocks' processing rates, which bind past some link speed (below).
  HardwareSpec slow = h100();
  slow.nccl.channel_copy_bytes_per_ps = slow.nccl.channel_reduce_bytes_per_ps = 0;
  HardwareSpec fast = slow;
  fast.fabric.nvlink.bytes_per_ps *= 2;
  const double bytes = 4e9;
  auto run = [&](const HardwareSpec& hw) {
    const auto [tl, first] = world_collective(CollectiveKind::all_gather, bytes, 8, hw);
    return op_us(tl, first);
  };
  const double latency_us = to_us(plan_ring(CollectiveKind::all_gather, bytes, 8, slow, kLink).latency);
  CHECK((run(fast) - latency_us) / (run(slow) - latency_us) == Approx(0.5).epsilon(0.01));
}

namespace {
// One ring collective of `bytes` over the first `n` of 8 GPUs, simulated: its time in us.
double simulated_ring_us(CollectiveKind kind, double bytes, int n, const HardwareSpec& hw) {
  Dag dag(8);
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  const int g = dag.new_group(dag.add_process_group(ranks));
  OpId first = 0;
  for (int r = 0; r < n; ++r) {
    const OpId id = dag.add(r, 0, "c", CollectiveOp{kind, bytes, g});
    if (r == 0) first = id;
  }
  return op_us(execute(dag, hw), first);
}
}  // namespace

TEST_CASE("A ring's blocks process the whole buffer whatever the group size: n stages of 1/n", "[cost][nccl]") {
  const NcclSpec& nccl = h100().nccl;
  REQUIRE(nccl.channel_rates_present());
  const double bytes = 2e9;
  for (int n : {2, 4, 8}) {
    // Conservation: an all-gather copies the buffer once, a reduce-scatter reduces it once.
    CHECK(to_us(ring_processing_time(CollectiveKind::all_gather, bytes, n, 24, nccl)) ==
          Approx(bytes / (24 * nccl.channel_copy_bytes_per_ps) / 1e6).epsilon(1e-6));
    CHECK(to_us(ring_processing_time(CollectiveKind::reduce_scatter, bytes, n, 24, nccl)) ==
          Approx(bytes / (24 * nccl.channel_reduce_bytes_per_ps) / 1e6).epsilon(1e-6));
    // An all-reduce ring reduces the buffer and copies all of it: the step that completes a
    // chunk's sum also stores and forwards it (recvReduceCopySend), so its all-gather half
    // handles n chunks, as an all-gather does.
    CHECK(ring_processing_time(CollectiveKind::all_reduce, bytes, n, 24, nccl) ==
          ring_processing_time(CollectiveKind::reduce_scatter, bytes, n, 24, nccl) +
              ring_processing_time(CollectiveKind::all_gather, bytes, n, 24, nccl));
  }
  // Half the channels, twice the time; no rates, no floor.
  CHECK(to_us(ring_processing_time(CollectiveKind::all_gather, bytes, 8, 12, nccl)) ==
        Approx(2 * to_us(ring_processing_time(CollectiveKind::all_gather, bytes, 8, 24, nccl))).epsilon(1e-6));
  HardwareSpec none = h100();
  none.nccl.channel_copy_bytes_per_ps = none.nccl.channel_reduce_bytes_per_ps = 0;
  CHECK(ring_processing_time(CollectiveKind::reduce_scatter, bytes, 2, 24, none.nccl) == 0);
}

TEST_CASE("A small group's ring is bound by its blocks, not by its links", "[cost][nccl]") {
  const double bytes = 2e9;
  // Links alone, a 2-GPU ring sends half the buffer where 8 send 7/8 of it: 4/7 of the time.
  HardwareSpec links_only = h100();
  links_only.nccl.channel_copy_bytes_per_ps = links_only.nccl.channel_reduce_bytes_per_ps = 0;
  const double rs2_links = simulated_ring_us(CollectiveKind::reduce_scatter, bytes, 2, links_only);
  const double rs8_links = simulated_ring_us(CollectiveKind::reduce_scatter, bytes, 8, links_only);
  CHECK(rs2_links / rs8_links == Approx(4.0 / 7).epsilon(0.02));
  // With the blocks' rates the 2-GPU reduce-scatter is bound by them: as long as the
  // processing floor, no faster than 8 GPUs by more than the link share, and slower than
  // the links alone would make it.
  const double rs2 = simulated_ring_us(CollectiveKind::reduce_scatter, bytes, 2, h100());
  const double rs8 = simulated_ring_us(CollectiveKind::reduce_scatter, bytes, 8, h100());
  const double floor_us =
      to_us(nccl_ring_startup(nccl_simple_protocol(h100().nccl), h100().nccl) +
            ring_processing_time(CollectiveKind::reduce_scatter, bytes, 2, 24, h100().nccl));
  CHECK(rs2 == Approx(floor_us).epsilon(0.001));
  CHECK(rs2 > 1.5 * rs2_links);
  CHECK(rs2 / rs8 > 0.9);
  // Doubling the links does not speed up a ring its blocks bind.
  HardwareSpec fast = h100();
  fast.fabric.nvlink.bytes_per_ps *= 2;
  CHECK(simulated_ring_us(CollectiveKind::reduce_scatter, bytes, 2, fast) == Approx(rs2).epsilon(1e-9));
}

TEST_CASE("Over the network NCCL's protocols keep only their format's overhead: Simple whole, LL half", "[cost][nccl]") {
  const NcclSpec& nccl = h100().nccl;
  for (const NcclProtocol& p : nccl.protocols) {
    const double share = nccl_network_payload_share(p, nccl);
    if (p.name == "Simple") CHECK(share == 1.0);
    if (p.name == "LL") CHECK(share == Approx(0.5).epsilon(0.03));       // 8 bytes of data in every 16
    if (p.name == "LL128") CHECK(share == Approx(0.9375).epsilon(0.03)); // 120 in every 128
    CHECK(share >= p.bandwidth_efficiency);  // NVLink's store overhead is not on the network
  }
}

TEST_CASE("A ring across two simulated nodes leaves each through every GPU's NIC: 8 NICs' rate, near one NVLink port", "[cost][nccl]") {
  // NVIDIA's figure: 46-48 GB/s of ring bus bandwidth per NDR NIC (nccl-tests issue 290).
  const HardwareSpec& two_nodes = load_hardware_file(models_dir() + "/h100_sxm_2node.json");
  const double bytes = 8.0 * (1 << 30);
  const auto [tl, first] = world_collective(CollectiveKind::all_gather, bytes, 16, two_nodes);
  const double busbw_gbps = bytes * 15 / 16 / (op_us(tl, first) * 1e3);
  CHECK(busbw_gbps / 8 > 45.0);
  CHECK(busbw_gbps / 8 < 48.0);
  // Each GPU sent 1/8 of its ring bytes through its NIC, the rest over NVLink.
  for (int r = 0; r < 16; ++r) CHECK(tl.egress_bytes_across_nodes[static_cast<std::size_t>(r)] == Approx(bytes * 15 / 16 / 8).epsilon(1e-6));
}

TEST_CASE("A protocol's own start-up delays its ring by exactly that much and never decides the protocol", "[cost][nccl]") {
  // h100_sxm gives LL and LL128 (no pipeline to fill) a shorter start than Simple.
  const HardwareSpec& hw = h100();
  HardwareSpec common = hw;  // every protocol on the ring's one start-up
  for (NcclProtocol& p : common.nccl.protocols) p.startup.reset();
  for (double bytes : {64e3, 2e6, 8e6, 32e6, 128e6, 1e9}) {
    INFO(bytes);
    for (CollectiveKind kind : {CollectiveKind::all_gather, CollectiveKind::reduce_scatter}) {
      const CollectivePlan own = plan_ring(kind, bytes, 8, hw, kLink);
      const CollectivePlan shared = plan_ring(kind, bytes, 8, common, kLink);
      CHECK(own.protocol->name == shared.protocol->name);
      CHECK(own.latency - shared.latency == nccl_ring_startup(*own.protocol, hw.nccl) - hw.nccl.ring_startup);
      CHECK(own.processing - shared.processing == own.latency - shared.latency);
    }
  }
  // Simple's chunked pipeline starts later than the flag-per-line protocols.
  for (const NcclProtocol& p : hw.nccl.protocols)
    if (p.name != "Simple") CHECK(nccl_ring_startup(p, hw.nccl) < nccl_ring_startup(nccl_simple_protocol(hw.nccl), hw.nccl));
  // Where a protocol has none of its own, its rings start as every ring does.
  CHECK(nccl_ring_startup(common.nccl.protocols.front(), common.nccl) == common.nccl.ring_startup);
}

TEST_CASE("A 2 MiB ring, on LL, starts sooner than Simple's pipeline fills: small rings cost their hops and bytes", "[cost][nccl]") {
  // Simulated end to end on h100_sxm: the 2 MiB all-gather runs LL and takes NCCL's own latency
  // model plus its bytes (no Simple start-up on top), well under the 37.7 us every ring's
  // 15.5 us start gave it (Megatron-LM PR 5596 measured 20.2 us).
  const auto [small_tl, small_op] = world_collective(CollectiveKind::all_gather, 2.0 * 1048576, 8, h100());
  const double small_us = op_us(small_tl, small_op);
  const CollectivePlan small = plan_ring(CollectiveKind::all_gather, 2.0 * 1048576, 8, h100(), kLink);
  REQUIRE(small.protocol->name == "LL");
  CHECK(small_us < 25.0);
  CHECK(small_us > to_us(small.protocol->base_latency + 7 * small.protocol->step_latency));
}

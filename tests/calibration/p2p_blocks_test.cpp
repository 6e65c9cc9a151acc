// NCCL's send/recv blocks: each channel's block moves its parts of every send, receive
// and copy to itself, so an all-to-all ends no sooner than its busiest block has.
#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/calibration/fit.hpp"
#include "tpsim/calibration/measurement.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/calibration/microbench_plan.hpp"
#include "tpsim/cost/p2p_plan.hpp"
#include "tpsim/io/hardware_loader.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {
constexpr double kMiB = 1024.0 * 1024.0;

// An all-to-all of `buffer` bytes a rank over `ranks` GPUs of one node, as NCCL plans it:
// a round per peer and one to itself.
P2pPlan all_to_all_plan(double buffer, int ranks, const NcclSpec& nccl) {
  std::vector<P2pRound> rounds;
  for (int d = 0; d < ranks; ++d) rounds.push_back({d, buffer / ranks});
  return plan_p2p(rounds, {ranks, 8}, nccl);
}

Measurement all_to_all_row(int gpus, double bytes) {
  Measurement m;
  m.kind = MeasurementKind::all_to_all;
  m.gpus = gpus;
  m.groups = 8 / gpus;
  m.bytes = bytes;
  m.time_us = 1;
  return m;
}
}  // namespace

TEST_CASE("send/recv blocks: every part of a send, a receive and the copy to itself lands on one block", "[cost][p2p]") {
  const NcclSpec& nccl = h100().nccl;  // 32 p2p channels, 32 a peer
  // Over 2: 128 MiB to the peer and 128 to itself, each round 16 parts of 8 MiB (2 x 16 > 32
  // channels starts a round at 16); the copy on channels 0-15, the peer's round (mirrored
  // to 16) on 16-31, where each block sends 8 MiB and receives 8.
  const P2pPlan two = all_to_all_plan(256 * kMiB, 2, nccl);
  CHECK(two.blocks == 32);
  CHECK(two.busiest_block_bytes == Approx(16 * kMiB));
  // Over 8: 8 rounds of 32 MiB in 4 parts, one round a block: the same 8 MiB out and 8 in.
  const P2pPlan eight = all_to_all_plan(256 * kMiB, 8, nccl);
  CHECK(eight.blocks == 32);
  CHECK(eight.busiest_block_bytes == Approx(16 * kMiB));
  // Over 2 at 512 MiB a round is 32 parts of 16 MiB: copy and peer share every channel.
  CHECK(all_to_all_plan(1024 * kMiB, 2, nccl).busiest_block_bytes == Approx(48 * kMiB));
  // The floor is the busiest block's bytes at the block rate: twice the rate, half the time.
  const Tick t = p2p_processing_time(two, nccl);
  CHECK(to_us(t) == Approx(16 * kMiB / (nccl.p2p.channel_bytes_per_ps * 1e6)).epsilon(1e-6));
  NcclSpec faster = nccl;
  faster.p2p.channel_bytes_per_ps *= 2;
  CHECK(static_cast<double>(p2p_processing_time(two, faster)) == Approx(t / 2.0).epsilon(1e-6));
  NcclSpec unmodelled = nccl;
  unmodelled.p2p.channel_bytes_per_ps = 0;
  CHECK(p2p_processing_time(two, unmodelled) == 0);
}

TEST_CASE("send/recv blocks: a part for a peer in another node holds its channel but sets no floor", "[cost][p2p]") {
  const NcclSpec& nccl = h100().nccl;
  // 16 ranks, 8 a node: rank 0's peer 8 ranks ahead is in the other node; 1 ahead is not.
  const P2pPlan across = plan_p2p({{8, 64 * kMiB}}, {16, 8, 0}, nccl);
  CHECK(across.blocks > 0);
  CHECK(across.busiest_block_bytes == 0);
  CHECK(plan_p2p({{1, 64 * kMiB}}, {16, 8, 0}, nccl).busiest_block_bytes > 0);
}

TEST_CASE("An all-to-all row runs NCCL's copy to itself: 1/gpus of the buffer on every rank", "[calibration][p2p]") {
  const MeasurementDag md = measurement_dag(all_to_all_row(4, 64 * kMiB));
  for (OpId id = 0; id < md.dag.size(); ++id) {
    const auto* s = std::get_if<SendRecvOp>(&md.dag.op(id).payload);
    REQUIRE(s != nullptr);
    CHECK(s->sends.size() == 3);
    CHECK(s->self_bytes == Approx(16 * kMiB));
  }
}

TEST_CASE("Where NCCL's blocks bind, an all-to-all takes as long over 2, 4 or 8 GPUs, as XLA measured on B200s", "[calibration][published]") {
  // Each block moves 8 MiB out and 8 in over 2, 4 or 8 GPUs (256 MiB a rank), while the
  // links carry 1/2, 3/4 or 7/8 of the buffer: XLA's table has 453, 459 and 459 us.
  const HardwareSpec b200 = load_hardware_file(models_dir() + "/b200.json");
  std::vector<double> us;
  for (int gpus : {2, 4, 8}) us.push_back(predict_us(all_to_all_row(gpus, 256 * kMiB), b200));
  CHECK(us[0] == Approx(us[2]).epsilon(0.01));
  CHECK(us[1] == Approx(us[2]).epsilon(0.01));
  // The links alone would take the group of 2 about half the time of 8.
  HardwareSpec links = b200;
  links.nccl.p2p.channel_bytes_per_ps = 0;
  CHECK(predict_us(all_to_all_row(2, 256 * kMiB), links) < 0.65 * predict_us(all_to_all_row(8, 256 * kMiB), links));
}

TEST_CASE("The block rate fitted to XLA's all-to-alls over 2 GPUs predicts those over 4 and 8, held out", "[calibration][published]") {
  // b200's and h100_sxm's nccl.p2p.channel_bandwidth are fitted to the groups of 2 only.
  for (const auto& [model, file] : {std::pair{"b200", "xla_b200"}, std::pair{"h100_sxm", "xla_h100"}}) {
    INFO(model);
    const HardwareSpec hw = load_hardware_file(models_dir() + "/" + model + ".json");
    std::vector<Measurement> fitted, held_out;
    for (const char* suffix : {"_collectives.json", "_collectives_subgroups.json"})
      for (const auto& m : load_measurements_file(models_dir() + "/measurements/" + file + suffix))
        if (m.kind == MeasurementKind::all_to_all) (m.gpus == 2 ? fitted : held_out).push_back(m);
    REQUIRE(fitted.size() == 4);
    REQUIRE(held_out.size() == 8);
    std::vector<double> p_fitted, p_held_out;
    for (const auto& m : fitted) p_fitted.push_back(predict_us(m, hw));
    for (const auto& m : held_out) p_held_out.push_back(predict_us(m, hw));
    CHECK(mean_abs_error(p_fitted, fitted) < 0.075);
    CHECK(mean_abs_error(p_held_out, held_out) < 0.09);
  }
}

TEST_CASE("A send_recv row is one ring step: each rank to the next, on a communicator of all, busbw its algorithm bandwidth", "[calibration][p2p]") {
  const Json file = Json::parse(R"({"format": "tpsim-measurements", "hardware": "h100_sxm", "measurements": [
      {"kind": "send_recv", "gpus": 8, "bytes": 16777216, "busbw_gbps": 100, "source": "test"}]})");
  const std::vector<Measurement> ms = parse_measurements(file, "test");
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].kind == MeasurementKind::send_recv);
  CHECK(ms[0].time_us == Approx(16777216 / 100e9 * 1e6));  // sendrecv_perf: busbw = algbw
  const MeasurementDag md = measurement_dag(ms[0]);
  for (OpId id = 0; id < md.dag.size(); ++id) {
    const auto& s = std::get<SendRecvOp>(md.dag.op(id).payload);
    REQUIRE(s.sends.size() == 1);
    CHECK(s.sends[0].peer == (md.dag.op(id).rank + 1) % 8);
    CHECK(s.self_bytes == 0);
  }
}

TEST_CASE("One peer in a communicator of 8 gets 4 channels: a 16 MiB ring step is bound by its blocks, in one of 2 by its links", "[calibration][p2p]") {
  Measurement m;
  m.kind = MeasurementKind::send_recv;
  m.bytes = 16 * kMiB;
  m.time_us = 1;
  m.gpus = 8;
  const double eight = predict_us(m, h100());
  m.gpus = 2;
  const double two = predict_us(m, h100());
  HardwareSpec links = h100();
  links.nccl.p2p.channel_bytes_per_ps = 0;
  const double links_only = predict_us(m, links);
  // 4 blocks, each 4 MiB out and 4 in, at the block rate; over 2, 16 blocks of 1 MiB each way.
  CHECK(eight == Approx(8 * kMiB / (h100().nccl.p2p.channel_bytes_per_ps * 1e6)).epsilon(0.05));
  CHECK(eight > 3 * links_only);
  CHECK(two < 1.5 * links_only);
  // The microbenchmark plan times such steps and all-to-alls over pairs, to fit and check the rate.
  int send_recvs = 0, pairs = 0;
  for (const Measurement& row : microbench_measurements(8, Dtype::bf16)) {
    send_recvs += row.kind == MeasurementKind::send_recv && row.gpus == 8;
    pairs += row.kind == MeasurementKind::all_to_all && row.gpus == 2 && row.groups == 4;
  }
  CHECK(send_recvs >= 3);
  CHECK(pairs >= 3);
}

TEST_CASE("A ring step's block floor is a sawtooth: NCCL doubles the parts once a part would pass 16 MiB", "[cost][p2p]") {
  const NcclSpec& nccl = h100().nccl;
  // In a communicator of 8 a message starts at 4 parts; 64 MiB fills 4 parts of 16 MiB, a
  // little more takes 8 parts of half the size, so its busiest block halves.
  const auto floor_us = [&](double bytes) { return to_us(p2p_processing_time(plan_p2p({{1, bytes}}, {8, 8}, nccl), nccl)); };
  CHECK(p2p_parts(64 * kMiB, {8, 8}, nccl) == 4);
  CHECK(p2p_parts(68 * kMiB, {8, 8}, nccl) == 8);
  CHECK(floor_us(68 * kMiB) < 0.6 * floor_us(64 * kMiB));
  // Between the steps it grows in proportion to the bytes.
  CHECK(floor_us(32 * kMiB) == Approx(floor_us(64 * kMiB) / 2).epsilon(1e-6));
}

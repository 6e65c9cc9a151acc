#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/cost/p2p_plan.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
const NcclSpec& nccl() { return h100().nccl; }
}  // namespace

TEST_CASE("send/recv: a ring step's send and receive share a round and its channels", "[cost][p2p]") {
  // 8 ranks in a node: at least 32 / 8 = 4 channels a round; 32 MiB in 4 parts of 8 MiB.
  CHECK(p2p_parts(32 * kMiB, {8, 8}, nccl()) == 4);
  CHECK(plan_p2p({{1, 32 * kMiB}}, {8, 8}, nccl()).blocks == 4);
  // Both directions of a bidirectional ring: rounds 1 and 7, mirrored to channels 16 and 28.
  CHECK(plan_p2p({{1, 32 * kMiB}, {7, 32 * kMiB}}, {8, 8}, nccl()).blocks == 8);
}

TEST_CASE("send/recv: parts double until a chunk is at most 32 NVLink chunks, up to a peer's channels", "[cost][p2p]") {
  // 512 KiB chunks: at most 16 MiB a part. 64 MiB stays at 4 parts, 128 MiB takes 8, 1 GiB
  // the 32 a peer may use (parts of 32 MiB then).
  CHECK(p2p_parts(64 * kMiB, {8, 8}, nccl()) == 4);
  CHECK(p2p_parts(128 * kMiB, {8, 8}, nccl()) == 8);
  CHECK(p2p_parts(1024 * kMiB, {8, 8}, nccl()) == 32);
  CHECK(p2p_parts(4096 * kMiB, {8, 8}, nccl()) == 32);  // then the parts grow: 128 MiB each
  CHECK(plan_p2p({{1, 4096 * kMiB}}, {8, 8}, nccl()).blocks == 32);
  // Up to 32 parts of 16 MiB no part is larger (nor are there more parts than a peer's
  // channels); past it, none is smaller. (The count is no staircase: chunks align to 64 KiB,
  // so 200 KiB takes 4 parts of 64 KiB and 274 KiB 3 of 128.)
  for (double b = 1024; b < 8192 * kMiB; b *= 1.37) {
    const int parts = p2p_parts(b, {8, 8}, nccl());
    INFO(b);
    CHECK(parts <= 32);
    if (b <= 32 * 16 * kMiB) CHECK(b / parts <= 16 * kMiB);
    else CHECK(parts == 32);
  }
  CHECK(p2p_parts(200 * 1024.0, {8, 8}, nccl()) == 4);
  CHECK(p2p_parts(274 * 1024.0, {8, 8}, nccl()) == 3);
  // Fewer ranks, more channels a round: 2 ranks start at 16.
  CHECK(p2p_parts(32 * kMiB, {2, 2}, nccl()) == 16);
  // Small messages: 64 KiB parts at least, and a zero-byte message is still one (a sync).
  CHECK(p2p_parts(100 * 1024.0, {8, 8}, nccl()) == 2);
  CHECK(p2p_parts(0, {8, 8}, nccl()) == 1);
}

TEST_CASE("send/recv: an all-to-all's rounds start on mirrored channels and fill the channel space", "[cost][p2p]") {
  std::vector<P2pRound> rounds;
  for (int d = 1; d < 8; ++d) rounds.push_back({d, 256 * kMiB});
  CHECK(plan_p2p(rounds, {8, 8}, nccl()).blocks == 32);
  // Small pieces: one part a round, seven rounds on seven distinct channels.
  rounds.clear();
  for (int d = 1; d < 8; ++d) rounds.push_back({d, 32 * 1024.0});
  CHECK(plan_p2p(rounds, {8, 8}, nccl()).blocks == 7);
}

TEST_CASE("send/recv: LL up to the threshold, Simple above, never LL128", "[cost][p2p]") {
  const double t = nccl().p2p.ll_threshold_bytes;
  CHECK(t == 16384);
  CHECK(plan_p2p({{1, t}}, {8, 8}, nccl()).protocol->name == "LL");
  CHECK(plan_p2p({{1, t + 1}}, {8, 8}, nccl()).protocol->name == "Simple");
  for (double b = 2 * t; b < 4096 * kMiB; b *= 3) CHECK(plan_p2p({{1, b}}, {8, 8}, nccl()).protocol->name == "Simple");
}

TEST_CASE("send/recv across nodes: network chunks and 2 channels a peer", "[cost][p2p]") {
  // 16 ranks over two nodes: a peer across the network gets 2 channels, and so does every
  // peer of the communicator; parts are at most one 128 KiB chunk... unless the channels run
  // out first: 32 MiB in 2 parts.
  CHECK(p2p_parts(32 * kMiB, {16, 8}, nccl()) == 2);
  CHECK(plan_p2p({{1, 32 * kMiB}}, {16, 8}, nccl()).blocks == 4);  // rank 0 receives from the other node: below
  // Inside a node a ring step's send and receive share their channels whatever the rank;
  // across nodes the rank at a node's edge sends to the next node (a node distance of 1)
  // and receives from its own node (none), from two bases: twice an inner rank's blocks.
  CHECK(plan_p2p({{1, 32 * kMiB}}, {8, 8, 5}, nccl()).blocks == 4);
  CHECK(plan_p2p({{1, 32 * kMiB}}, {16, 8, 3}, nccl()).blocks == 2);
  CHECK(plan_p2p({{1, 32 * kMiB}}, {16, 8, 7}, nccl()).blocks == 4);
  CHECK(plan_p2p({{1, 32 * kMiB}}, {16, 8, 8}, nccl()).blocks == 4);
  // Past 64 ranks NCCL halves a network peer's channels.
  CHECK(p2p_parts(32 * kMiB, {128, 8}, nccl()) == 1);
}

TEST_CASE("send/recv in the simulator: channels that fit beside a GEMM's partial wave overlap it", "[cost][p2p][runtime]") {
  // seed 002's 8-GPU shard: 1024 x 4096 x 4096 leaves SMs of its one wave idle, as many as
  // the ring step's 4 channels need; the step's 8 MiB start beside the GEMM, not after it.
  const GemmProblem shard{1024, 4096, 4096, Dtype::fp16, 1};
  const GemmPlan gp = plan_gemm(shard, h100());
  const int idle = h100().sm.count - static_cast<int>(gp.blocks);
  const P2pPlan pp = plan_p2p({{1, 8 * kMiB}}, {8, 8}, nccl());
  REQUIRE(idle >= pp.blocks);
  Dag dag(8);
  std::vector<OpId> gemm, step;
  const int g = dag.new_group();
  for (int r = 0; r < 8; ++r) {
    gemm.push_back(dag.add(r, 0, "gemm", GemmOp{shard}));
    step.push_back(dag.add(r, 1, "step", SendRecvOp{{Transfer{(r + 1) % 8, 8 * kMiB}}, g}));
  }
  const Timeline tl = execute(dag, h100());
  CHECK(tl.ops[step[0]].start < tl.ops[gemm[0]].end);
}

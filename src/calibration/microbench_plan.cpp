#include "tpsim/calibration/microbench_plan.hpp"

#include <utility>

#include <fmt/format.h>

namespace tpsim {

namespace {

Measurement gemm(std::int64_t m, std::int64_t n, std::int64_t k, Dtype d) {
  Measurement x;
  x.kind = MeasurementKind::gemm;
  x.gemm = {m, n, k, d};
  x.name = fmt::format("gemm {}x{}x{} {}", m, n, k, dtype_name(d));
  return x;
}

Measurement sized(MeasurementKind kind, double bytes, int gpus) {
  Measurement x;
  x.kind = kind;
  x.bytes = bytes;
  x.gpus = gpus;
  x.name = fmt::format("{} {:.0f} B x{}", measurement_kind_name(kind), bytes, gpus);
  return x;
}

constexpr double kMiB = 1048576.0;
constexpr int kHeuristicRanksTimed = 8;  // the heuristic's first choice and its next seven

// Two GPUs, each running `g` while it copies `mib` MiB to the other: `gemm_with_peer_copy` times
// the GEMM, `peer_copy_with_gemm` the copy.
Measurement gemm_and_peer_copy(MeasurementKind kind, const GemmProblem& g, double mib) {
  Measurement x = gemm(g.m, g.n, g.k, g.dtype);
  x.kind = kind;
  x.bytes = mib * kMiB;
  x.gpus = 2;
  const std::string size = mib >= 1024 ? fmt::format("{:.0f} GiB", mib / 1024) : fmt::format("{:.0f} MiB", mib);
  x.name = kind == MeasurementKind::gemm_with_peer_copy ? fmt::format("{} + peer copy {}", x.name, size)
                                                         : fmt::format("peer copy {} beside {}", size, x.name);
  return x;
}

}  // namespace

std::vector<Measurement> microbench_measurements(int gpus, Dtype dtype) {
  std::vector<Measurement> out;
  // The staircase: with 128x256 tiles an N=8192 GEMM has 32 tiles per 128 rows;
  // these M cross wave boundaries of a 132-SM GPU and land between them.
  for (std::int64_t m : {512, 1024, 2048, 4096, 4224, 4352, 6144, 8192, 8448})
    out.push_back(gemm(m, 8192, 8192, dtype));
  for (std::int64_t k : {256, 512, 1024, 2048, 8192, 16384}) out.push_back(gemm(4096, 4096, k, dtype));
  for (std::int64_t m : {128, 256}) out.push_back(gemm(m, 8192, 8192, dtype));  // small M: weight-read bound
  // Async TP's submatmuls: a rank's shard of an all-gather or its chunk for one peer in a
  // reduce-scatter, thin (64-1024 rows) against a wide, deep weight, at the widths of
  // kraken's async-TP benchmarks (N 6656 and 4096) and of Llama 3 70B's FFN under TP 8
  // (N 3584). Alone, then two at once on two streams as the alternating streams run them:
  // what the vendor heuristic picks for thin shapes, and how two such kernels share the GPU.
  const std::pair<std::int64_t, std::int64_t> weights[] = {{6656, 4096}, {6656, 16384}, {4096, 14336}, {3584, 8192}};
  for (const auto kind : {MeasurementKind::gemm, MeasurementKind::gemm_pair})
    for (const auto& [n, k] : weights)
      for (std::int64_t m : {64, 128, 256, 512, 1024}) {
        out.push_back(gemm(m, n, k, dtype));
        out.back().kind = kind;
        if (kind == MeasurementKind::gemm_pair) out.back().name += " x2 on two streams";
      }
  // The same thin submatmuls run by the heuristic's next algorithms (ranks 1-7: other tiles, other
  // thread-block clusters, other splits), each priced at the plan it ran: how a kernel's tile and
  // cluster set its time apart from its shape (cluster multicast, the small tiles' step floor).
  for (const auto& [n, k] : weights)
    for (std::int64_t m : {128, 256, 512})
      for (int rank = 1; rank < kHeuristicRanksTimed; ++rank) {
        out.push_back(gemm(m, n, k, dtype));
        out.back().gemm.heuristic_rank = rank;
        out.back().name += fmt::format(", cuBLASLt algorithm {}", rank);
      }
  // The heuristic's first algorithm for the same submatmuls made to run in each cluster of up to 8
  // CTAs: same tile, stages and split, only the cluster changes, so what its CTAs' shared operand
  // loads (TMA multicast) buy comes apart from the tile and the shape. A cluster the algorithm
  // cannot run in is left out on that machine.
  const GemmProblem::Cluster clusters[] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 4}, {4, 2}, {2, 4}};
  for (const auto& [n, k] : weights)
    for (std::int64_t m : {128, 256, 512})
      for (const GemmProblem::Cluster& cluster : clusters) {
        out.push_back(gemm(m, n, k, dtype));
        out.back().gemm.cluster = cluster;
        out.back().name += fmt::format(", cluster {}x{}", cluster.m, cluster.n);
      }
  out.push_back(gemm(8192, 8192, 8192, dtype));  // two that fill the GPU alone: about twice one
  out.back().kind = MeasurementKind::gemm_pair;
  out.back().name += " x2 on two streams";
  for (double mib : {1.0, 16.0, 256.0, 1024.0}) out.push_back(sized(MeasurementKind::local_copy, mib * kMiB, 1));
  Measurement launch;
  launch.kind = MeasurementKind::launch;
  launch.name = "launch";
  out.push_back(launch);
  if (gpus < 2) return out;
  for (double mib : {0.0625, 1.0, 4.0, 16.0, 256.0, 1024.0}) out.push_back(sized(MeasurementKind::peer_copy, mib * kMiB, 2));
  // At least two sizes on each protocol NCCL picks on a node (LL, LL128, Simple), so a ring's
  // start-up and hop latency come apart from its payload rate; dense around the protocols'
  // crossovers (a few and a few tens of MiB on 8 GPUs), where they fall varies with the machine.
  for (auto kind : {MeasurementKind::all_gather, MeasurementKind::reduce_scatter})
    for (double mib : {0.25, 1.0, 4.0, 8.0, 16.0, 32.0, 128.0, 1024.0}) out.push_back(sized(kind, mib * kMiB, gpus));
  // NCCL send/recv: all-to-alls over every GPU and over pairs (a pair's links do not bind,
  // its channel blocks do: nccl.p2p.channel_bandwidth), and ring steps, one peer in a
  // communicator of all (few channels a peer: what a `ring` variant's steps get).
  for (double mib : {16.0, 256.0, 1024.0}) {
    out.push_back(sized(MeasurementKind::all_to_all, mib * kMiB, gpus));
    if (gpus < 4 || gpus % 2 != 0) continue;
    out.push_back(sized(MeasurementKind::all_to_all, mib * kMiB, 2));
    out.back().groups = gpus / 2;
    out.back().name += fmt::format(" ({} groups at once)", gpus / 2);
  }
  for (double mib : {1.0, 16.0, 64.0, 256.0}) out.push_back(sized(MeasurementKind::send_recv, mib * kMiB, gpus));
  out.push_back(sized(MeasurementKind::barrier, 0, gpus));
  out.back().name = fmt::format("barrier x{}", gpus);
  if (gpus >= 4 && gpus % 2 == 0) {
    // One half of the GPUs gathering alone, then both halves at once (two TP groups
    // on one node): what groups that share no GPU still share of the fabric.
    for (int groups : {1, 2}) {
      out.push_back(sized(MeasurementKind::all_gather, 256 * kMiB, gpus / 2));
      out.back().groups = groups;
      if (groups > 1) out.back().name += fmt::format(" ({} groups at once)", groups);
    }
  }
  const GemmProblem compute_bound{8192, 8192, 8192, dtype};
  out.push_back(gemm_and_peer_copy(MeasurementKind::gemm_with_peer_copy, compute_bound, 1024));
  // A copy-engine pull beside a GEMM that streams its weight from HBM (async TP's all-gather
  // pulls the next shard while the other stream multiplies one: kraken's 128-row shard against
  // 16384 x 6656) and beside one bound by its tensor cores: how much of the HBM a copy engine
  // gets when SMs already draw all of it, and what the copy takes from the GEMM.
  const GemmProblem streaming{128, 6656, 16384, dtype};
  for (const GemmProblem& g : {streaming, compute_bound})
    for (double mib : {4.0, 16.0}) out.push_back(gemm_and_peer_copy(MeasurementKind::peer_copy_with_gemm, g, mib));
  out.push_back(gemm_and_peer_copy(MeasurementKind::gemm_with_peer_copy, streaming, 16));
  Measurement with_nccl = gemm(8192, 8192, 8192, dtype);
  with_nccl.kind = MeasurementKind::gemm_with_collective;
  with_nccl.collective = CollectiveKind::all_gather;
  with_nccl.bytes = 1024 * kMiB;
  with_nccl.gpus = gpus;
  with_nccl.name = fmt::format("gemm 8192x8192x8192 {} + all_gather 1 GiB x{}", dtype_name(dtype), gpus);
  out.push_back(with_nccl);
  return out;
}

}  // namespace tpsim

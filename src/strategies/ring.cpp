// JAX-style ppermute rings (seed 004): shards (all-gather) or accumulators
// (reduce-scatter) travel to the ring neighbour, one hop per step, each hop a
// collective-permute (NCCL send/recv kernel) overlapped with the submatmul on
// what arrived in the previous step.
#include <fmt/format.h>

#include "regions.hpp"

namespace tpsim::strategy {

namespace {

Region half_width(const Region& r) {
  Region h = r;
  h.bytes = r.bytes / 2;
  for (auto& g : h.gemms) g.shard.n = std::max<std::int64_t>(1, g.shard.n / 2);
  return h;
}

}  // namespace

// async_gather (bidirectional = false): step i passes the shard received in
// step i-1 up the ring, so after i steps rank r holds shard r-i.
// async_gather_bidirectional: each step passes one shard up and one down, so
// the G-1 remote shards arrive in ceil((G-1)/2) steps (the last one-way when G is even).
static void gather(Dag& dag, const Region& r, bool bidirectional) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int g = pg.size();
  const int steps = bidirectional ? g / 2 : g - 1;
  std::vector<int> groups;
  for (int i = 0; i < steps; ++i) groups.push_back(dag.new_group(r.pg));
  for (int rank = 0; rank < g; ++rank) {
    const int at = pg.rank(rank);  // `rank` indexes the group; `at` is the GPU
    add_gemms(dag, r, at, kCompute, false, fmt::format("{}.matmul.shard{}", r.name, rank));
    int received = 0;
    for (int i = 1; i <= steps; ++i) {
      std::vector<Transfer> sends{{pg.rank(rank + 1), r.bytes}};
      std::vector<int> arriving{wrap(rank - i, g)};
      if (bidirectional && received + 2 <= g - 1) {
        sends.push_back({pg.rank(rank - 1), r.bytes});
        arriving.push_back(wrap(rank + i, g));
      }
      received += static_cast<int>(arriving.size());
      dag.add(at, kComm, fmt::format("{}.ppermute.step{}", r.name, i), SendRecvOp{sends, groups[static_cast<std::size_t>(i - 1)]});
      dag.join(at, kComm, kCompute, fmt::format("{}.arrived.step{}", r.name, i));
      for (int shard : arriving) add_gemms(dag, r, at, kCompute, false, fmt::format("{}.matmul.shard{}", r.name, shard));
    }
  }
}

// async_scatter: at step i rank r computes its partial for rank r-1-i, adds the
// accumulator that just arrived, and passes it up; after G-1 hops each rank
// holds its own sum. The feature-split bidirectional form runs two such rings
// at once in opposite directions, each on half of the output features.
static void scatter(Dag& dag, const Region& whole, bool bidirectional) {
  const Region r = bidirectional ? half_width(whole) : whole;
  const ProcessGroup pg = dag.process_group(r.pg);
  const int g = pg.size();
  std::vector<int> groups;
  for (int i = 0; i + 1 < g; ++i) groups.push_back(dag.new_group(r.pg));
  for (int rank = 0; rank < g; ++rank) {
    const int at = pg.rank(rank);  // `rank` indexes the group; `at` is the GPU
    for (int i = 0; i < g; ++i) {
      add_gemms(dag, r, at, kCompute, false, fmt::format("{}.partial.chunk{}", r.name, wrap(rank - 1 - i, g)));
      if (bidirectional) add_gemms(dag, r, at, kCompute, false, fmt::format("{}.partial.chunk{}", r.name, wrap(rank + 1 + i, g)));
      if (i > 0) {
        dag.join(at, kComm, kCompute, fmt::format("{}.arrived.step{}", r.name, i));
        dag.add(at, kCompute, fmt::format("{}.accumulate.step{}", r.name, i), ElementwiseOp{2 * whole.bytes, whole.bytes});
      }
      if (i + 1 == g) break;
      dag.join(at, kCompute, kComm, fmt::format("{}.ready.step{}", r.name, i + 1));
      std::vector<Transfer> sends{{pg.rank(rank + 1), r.bytes}};
      if (bidirectional) sends.push_back({pg.rank(rank - 1), r.bytes});
      dag.add(at, kComm, fmt::format("{}.ppermute.step{}", r.name, i + 1), SendRecvOp{sends, groups[static_cast<std::size_t>(i)]});
    }
  }
}

void gather_ring(Dag& dag, const Region& r) { gather(dag, r, false); }
void gather_ring_bidirectional(Dag& dag, const Region& r) { gather(dag, r, true); }
void scatter_ring(Dag& dag, const Region& r) { scatter(dag, r, false); }
void scatter_ring_bidirectional(Dag& dag, const Region& r) { scatter(dag, r, true); }

}  // namespace tpsim::strategy

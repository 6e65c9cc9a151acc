// JAX-style ppermute rings (seed 004): shards (all-gather) or accumulators
// (reduce-scatter) travel to the ring neighbour, one hop per step, each hop a
// collective-permute (NCCL send/recv kernel) overlapped with the submatmul on
// what arrived in the previous step.
#include "common.hpp"
#include "tpsim/strategies/builders.hpp"

namespace tpsim {

using namespace strategy;

// async_gather (bidirectional = false): step i passes the shard received in
// step i-1 up the ring, so after i steps rank r holds shard r-i.
// async_gather_bidirectional: each step passes one shard up and one down, so
// the G-1 remote shards arrive in ceil((G-1)/2) steps (the last one-way when G is even).
static void build_gather(Dag& dag, const Scenario& s, bool bidirectional) {
  const Shards sh = shards_of(s);
  const int g = sh.ranks;
  const int steps = bidirectional ? g / 2 : g - 1;
  std::vector<int> groups;
  for (int i = 0; i < steps; ++i) groups.push_back(dag.new_group());
  for (int r = 0; r < g; ++r) {
    add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("ag_mm.matmul.shard{}", r));
    int received = 0;
    for (int i = 1; i <= steps; ++i) {
      std::vector<Transfer> sends{{wrap(r + 1, g), sh.shard_bytes}};
      std::vector<int> arriving{wrap(r - i, g)};
      const bool down = bidirectional && received + 2 <= g - 1;
      if (down) {
        sends.push_back({wrap(r - 1, g), sh.shard_bytes});
        arriving.push_back(wrap(r + i, g));
      }
      received += static_cast<int>(arriving.size());
      dag.add(r, kComm, fmt::format("ag_mm.ppermute.step{}", i), SendRecvOp{sends, groups[static_cast<std::size_t>(i - 1)]});
      dag.join(r, kComm, kCompute, fmt::format("ag_mm.arrived.step{}", i));
      for (int shard : arriving) add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("ag_mm.matmul.shard{}", shard));
    }
  }
}

// async_scatter: at step i rank r computes its partial for rank r-1-i, adds the
// accumulator that just arrived, and passes it up; after G-1 hops each rank
// holds its own sum. The feature-split bidirectional form runs two such rings
// at once in opposite directions, each on half of the output features.
static void build_scatter(Dag& dag, const Scenario& s, bool bidirectional) {
  const Shards sh = shards_of(s);
  const int g = sh.ranks;
  const double part = bidirectional ? 0.5 : 1.0;
  std::vector<int> groups;
  for (int i = 0; i + 1 < g; ++i) groups.push_back(dag.new_group());
  for (int r = 0; r < g; ++r) {
    for (int i = 0; i < g; ++i) {
      const int dest_up = wrap(r - 1 - i, g), dest_down = wrap(r + 1 + i, g);
      add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("mm_rs.partial.chunk{}", dest_up), part);
      if (bidirectional) add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("mm_rs.partial.chunk{}", dest_down), part);
      if (i > 0) {
        dag.join(r, kComm, kCompute, fmt::format("mm_rs.arrived.step{}", i));
        dag.add(r, kCompute, fmt::format("mm_rs.accumulate.step{}", i), ElementwiseOp{2 * sh.chunk_bytes, sh.chunk_bytes});
      }
      if (i + 1 == g) break;
      dag.join(r, kCompute, kComm, fmt::format("mm_rs.ready.step{}", i + 1));
      std::vector<Transfer> sends{{wrap(r + 1, g), part * sh.chunk_bytes}};
      if (bidirectional) sends.push_back({wrap(r - 1, g), part * sh.chunk_bytes});
      dag.add(r, kComm, fmt::format("mm_rs.ppermute.step{}", i + 1), SendRecvOp{sends, groups[static_cast<std::size_t>(i)]});
    }
  }
}

void build_allgather_matmul_ring(Dag& dag, const Scenario& s) { build_gather(dag, s, false); }
void build_allgather_matmul_ring_bidirectional(Dag& dag, const Scenario& s) { build_gather(dag, s, true); }
void build_matmul_reducescatter_ring(Dag& dag, const Scenario& s) { build_scatter(dag, s, false); }
void build_matmul_reducescatter_ring_bidirectional(Dag& dag, const Scenario& s) { build_scatter(dag, s, true); }

}  // namespace tpsim

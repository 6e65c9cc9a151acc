// async_tp_nccl: the same decomposition as PyTorch's async TP, but the peer
// copies are NCCL send/recv kernels on a communication stream. Those kernels hold
// SMs (p2p channel blocks) while the submatmuls run: the SM contention of seed 001.
#include "common.hpp"
#include "tpsim/strategies/builders.hpp"

namespace tpsim {

using namespace strategy;

// Step s: every rank sends its shard to r-s and receives r+s's shard, then
// multiplies it. The comm stream runs ahead of the compute stream.
void build_allgather_matmul_async_tp_nccl(Dag& dag, const Scenario& s) {
  const Shards sh = shards_of(s);
  const int g = sh.ranks;
  std::vector<int> groups;
  for (int step = 1; step < g; ++step) groups.push_back(dag.new_group());
  for (int r = 0; r < g; ++r) {
    add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("ag_mm.matmul.shard{}", r));
    for (int step = 1; step < g; ++step) {
      const int from = (r + step) % g;
      dag.add(r, kComm, fmt::format("ag_mm.sendrecv.shard{}", from),
              SendRecvOp{{Transfer{wrap(r - step, g), sh.shard_bytes}}, groups[static_cast<std::size_t>(step - 1)]});
      dag.join(r, kComm, kCompute, fmt::format("ag_mm.arrived.shard{}", from));
      add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("ag_mm.matmul.shard{}", from));
    }
  }
}

// Step s: compute the rows for r+s, send them there (receiving r-s's rows for
// this rank); finally sum the received chunks.
void build_matmul_reducescatter_async_tp_nccl(Dag& dag, const Scenario& s) {
  const Shards sh = shards_of(s);
  const int g = sh.ranks;
  std::vector<int> groups;
  for (int step = 1; step < g; ++step) groups.push_back(dag.new_group());
  for (int r = 0; r < g; ++r) {
    for (int step = 1; step < g; ++step) {
      const int to = (r + step) % g;
      add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("mm_rs.matmul.chunk{}", to));
      dag.join(r, kCompute, kComm, fmt::format("mm_rs.computed.chunk{}", to));
      dag.add(r, kComm, fmt::format("mm_rs.sendrecv.chunk{}", to),
              SendRecvOp{{Transfer{to, sh.chunk_bytes}}, groups[static_cast<std::size_t>(step - 1)]});
    }
    add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("mm_rs.matmul.chunk{}", r));
    dag.join(r, kComm, kCompute, "mm_rs.join");
    dag.add(r, kCompute, "mm_rs.reduce", ElementwiseOp{g * sh.chunk_bytes, sh.chunk_bytes});
  }
}

}  // namespace tpsim

// async_tp_nccl: the same decomposition as PyTorch's async TP, but the peer
// copies are NCCL send/recv kernels on a communication stream. Those kernels hold
// SMs (p2p channel blocks) while the submatmuls run: the SM contention of seed 001.
#include <fmt/format.h>

#include "regions.hpp"

namespace tpsim::strategy {

// Step s: every rank sends its shard to r-s and receives r+s's shard, then
// multiplies it. The comm stream runs ahead of the compute stream.
void gather_async_tp_nccl(Dag& dag, const Region& r) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int g = pg.size();
  std::vector<int> groups;
  for (int step = 1; step < g; ++step) groups.push_back(dag.new_group(r.pg));
  for (int rank = 0; rank < g; ++rank) {
    const int at = pg.rank(rank);  // `rank` indexes the group; `at` is the GPU
    add_gemms(dag, r, at, kCompute, false, fmt::format("{}.matmul.shard{}", r.name, rank));
    for (int step = 1; step < g; ++step) {
      const int from = (rank + step) % g;
      dag.add(at, kComm, fmt::format("{}.sendrecv.shard{}", r.name, from),
              SendRecvOp{{Transfer{pg.rank(wrap(rank - step, g)), r.bytes}}, groups[static_cast<std::size_t>(step - 1)]});
      dag.join(at, kComm, kCompute, fmt::format("{}.arrived.shard{}", r.name, from));
      add_gemms(dag, r, at, kCompute, false, fmt::format("{}.matmul.shard{}", r.name, from));
    }
  }
}

// Step s: compute the rows for r+s and send them there (receiving r-s's rows
// for this rank); finally sum the received chunks.
void scatter_async_tp_nccl(Dag& dag, const Region& r) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int g = pg.size();
  std::vector<int> groups;
  for (int step = 1; step < g; ++step) groups.push_back(dag.new_group(r.pg));
  for (int rank = 0; rank < g; ++rank) {
    const int at = pg.rank(rank);  // `rank` indexes the group; `at` is the GPU
    for (int step = 1; step < g; ++step) {
      const int to = (rank + step) % g;
      add_gemms(dag, r, at, kCompute, false, fmt::format("{}.matmul.chunk{}", r.name, to));
      dag.join(at, kCompute, kComm, fmt::format("{}.computed.chunk{}", r.name, to));
      dag.add(at, kComm, fmt::format("{}.sendrecv.chunk{}", r.name, to),
              SendRecvOp{{Transfer{pg.rank(to), r.bytes}}, groups[static_cast<std::size_t>(step - 1)]});
    }
    add_gemms(dag, r, at, kCompute, false, fmt::format("{}.matmul.chunk{}", r.name, rank));
    dag.join(at, kComm, kCompute, r.name + ".join");
    dag.add(at, kCompute, r.name + ".reduce", ElementwiseOp{g * r.bytes, r.bytes});
  }
}

}  // namespace tpsim::strategy

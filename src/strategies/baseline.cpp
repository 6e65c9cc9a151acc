// Baseline: NCCL ring collectives and cuBLAS GEMMs on one stream, so the
// communication is fully exposed.
#include "regions.hpp"

namespace tpsim::strategy {

void gather_baseline(Dag& dag, const Region& r) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int group = dag.new_group(r.pg);
  for (int rank : pg.ranks) {
    dag.add(rank, kCompute, r.name + ".all_gather", CollectiveOp{CollectiveKind::all_gather, pg.size() * r.bytes, group});
    if (r.copy_into_place) dag.add(rank, kCompute, r.name + ".cat", layout_copy(pg.size() * r.bytes));
    add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
  }
}

void scatter_baseline(Dag& dag, const Region& r) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int group = dag.new_group(r.pg);
  for (int rank : pg.ranks) {
    add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
    if (r.copy_into_place) dag.add(rank, kCompute, r.name + ".chunk_cat", layout_copy(pg.size() * r.bytes));
    dag.add(rank, kCompute, r.name + ".reduce_scatter", CollectiveOp{CollectiveKind::reduce_scatter, pg.size() * r.bytes, group});
  }
}

void all_reduce_baseline(Dag& dag, const Region& r) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int group = dag.new_group(r.pg);
  for (int rank : pg.ranks) {
    add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
    dag.add(rank, kCompute, r.name + ".all_reduce", CollectiveOp{CollectiveKind::all_reduce, r.bytes, group});
  }
}

}  // namespace tpsim::strategy

namespace tpsim::strategy {

// One rank: nothing to gather or scatter, the GEMMs run whole.
void whole_on_one_rank(Dag& dag, const Region& r) { add_gemms(dag, r, dag.process_group(r.pg).rank(0), kCompute, true, r.name + ".matmul"); }
// NCCL's all-to-all is grouped send/recv: every rank sends 1/G of its rows to each
// peer at once (its own share stays), the expert GEMM runs on the rows that arrived,
// and the products go back the same way.
void all_to_all_baseline(Dag& dag, const Region& r) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int dispatch = dag.new_group(r.pg), combine = dag.new_group(r.pg);
  const RegionGemm& g = r.gemms.front();
  const double out_bytes = static_cast<double>(g.whole.m) * static_cast<double>(g.whole.n) * dtype_bytes(r.dtype);
  const auto to_every_peer = [&](int rank, double bytes) {
    std::vector<Transfer> sends;
    for (int peer : pg.ranks)
      if (peer != rank) sends.push_back({peer, bytes / pg.size()});
    return sends;
  };
  for (int rank : pg.ranks) {
    // NCCL's all-to-all sends each rank's own share to itself too (a copy in the kernel).
    dag.add(rank, kCompute, r.name + ".dispatch", SendRecvOp{to_every_peer(rank, r.bytes), dispatch, r.bytes / pg.size()});
    add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
    dag.add(rank, kCompute, r.name + ".combine", SendRecvOp{to_every_peer(rank, out_bytes), combine, out_bytes / pg.size()});
  }
}

void gather_replicated(Dag& dag, const Region& r) {
  for (int rank : dag.process_group(r.pg).ranks) add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
}

}  // namespace tpsim::strategy

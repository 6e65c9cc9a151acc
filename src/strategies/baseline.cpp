// Baseline: NCCL ring collectives and cuBLAS GEMMs on one stream, so the
// communication is fully exposed.
#include "regions.hpp"

namespace tpsim::strategy {

void gather_baseline(Dag& dag, const Region& r) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int group = dag.new_group(r.pg);
  for (int rank : pg.ranks) {
    dag.add(rank, kCompute, r.name + ".all_gather", CollectiveOp{CollectiveKind::all_gather, pg.size() * r.bytes, group});
    add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
  }
}

void scatter_baseline(Dag& dag, const Region& r) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int group = dag.new_group(r.pg);
  for (int rank : pg.ranks) {
    add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
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
void gather_local(Dag& dag, const Region& r) { add_gemms(dag, r, dag.process_group(r.pg).rank(0), kCompute, true, r.name + ".matmul"); }
void gather_replicated(Dag& dag, const Region& r) {
  for (int rank : dag.process_group(r.pg).ranks) add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
}
void scatter_local(Dag& dag, const Region& r) { add_gemms(dag, r, dag.process_group(r.pg).rank(0), kCompute, true, r.name + ".matmul"); }

}  // namespace tpsim::strategy

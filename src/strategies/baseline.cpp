// Baseline: NCCL ring collectives and cuBLAS GEMMs on one stream, so the
// communication is fully exposed.
#include "regions.hpp"

namespace tpsim::strategy {

void gather_baseline(Dag& dag, const Region& r) {
  const int group = dag.new_group();
  for (int rank = 0; rank < r.ranks; ++rank) {
    dag.add(rank, kCompute, r.name + ".all_gather", CollectiveOp{CollectiveKind::all_gather, r.ranks * r.bytes, group});
    add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
  }
}

void scatter_baseline(Dag& dag, const Region& r) {
  const int group = dag.new_group();
  for (int rank = 0; rank < r.ranks; ++rank) {
    add_gemms(dag, r, rank, kCompute, true, r.name + ".matmul");
    dag.add(rank, kCompute, r.name + ".reduce_scatter", CollectiveOp{CollectiveKind::reduce_scatter, r.ranks * r.bytes, group});
  }
}

}  // namespace tpsim::strategy

namespace tpsim::strategy {

// One rank: nothing to gather or scatter, the GEMMs run whole.
void gather_local(Dag& dag, const Region& r) { add_gemms(dag, r, 0, kCompute, true, r.name + ".matmul"); }
void scatter_local(Dag& dag, const Region& r) { add_gemms(dag, r, 0, kCompute, true, r.name + ".matmul"); }

}  // namespace tpsim::strategy

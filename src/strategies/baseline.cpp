// Baseline: NCCL collectives and cuBLAS GEMMs per rank, all on one stream, so
// communication is fully exposed.
#include "common.hpp"
#include "tpsim/strategies/builders.hpp"

namespace tpsim {

using namespace strategy;

void build_matmul_baseline(Dag& dag, const Scenario& s) {
  for (int r = 0; r < s.gpus; ++r) add_matmuls(dag, r, kCompute, s.workload.m, s, "matmul");
}

void build_allgather_matmul_baseline(Dag& dag, const Scenario& s) {
  const double gathered = static_cast<double>(s.workload.m) * s.workload.k * dtype_bytes(s.dtype);
  const int group = dag.new_group();
  for (int r = 0; r < s.gpus; ++r) {
    dag.add(r, kCompute, "ag_mm.all_gather", CollectiveOp{CollectiveKind::all_gather, gathered, group});
    add_matmuls(dag, r, kCompute, s.workload.m, s, "ag_mm.matmul");
  }
}

void build_matmul_reducescatter_baseline(Dag& dag, const Scenario& s) {
  const double partials = static_cast<double>(s.workload.m) * s.workload.n_total() * dtype_bytes(s.dtype);
  const int group = dag.new_group();
  for (int r = 0; r < s.gpus; ++r) {
    add_matmuls(dag, r, kCompute, s.workload.m, s, "mm_rs.matmul");
    dag.add(r, kCompute, "mm_rs.reduce_scatter", CollectiveOp{CollectiveKind::reduce_scatter, partials, group});
  }
}

}  // namespace tpsim

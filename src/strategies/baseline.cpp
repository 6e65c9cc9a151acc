// Baseline: NCCL collectives and one cuBLAS GEMM per rank, all on one stream,
// so communication is fully exposed.
#include "tpsim/strategies/builders.hpp"

namespace tpsim {

void build_matmul_baseline(Dag& dag, const Scenario& s) {
  const auto& w = s.workload;
  for (int r = 0; r < s.gpus; ++r) dag.add(r, 0, "matmul", GemmOp{{w.m, w.n, w.k, s.dtype}});
}

void build_allgather_matmul_baseline(Dag& dag, const Scenario& s) {
  const auto& w = s.workload;
  const double gathered = static_cast<double>(w.m) * w.k * dtype_bytes(s.dtype);
  const int group = dag.new_group();
  for (int r = 0; r < s.gpus; ++r) {
    dag.add(r, 0, "ag_mm.all_gather", CollectiveOp{CollectiveKind::all_gather, gathered, group});
    dag.add(r, 0, "ag_mm.matmul", GemmOp{{w.m, w.n, w.k, s.dtype}});
  }
}

void build_matmul_reducescatter_baseline(Dag& dag, const Scenario& s) {
  const auto& w = s.workload;
  const double partials = static_cast<double>(w.m) * w.n * dtype_bytes(s.dtype);
  const int group = dag.new_group();
  for (int r = 0; r < s.gpus; ++r) {
    dag.add(r, 0, "mm_rs.matmul", GemmOp{{w.m, w.n, w.k, s.dtype}});
    dag.add(r, 0, "mm_rs.reduce_scatter", CollectiveOp{CollectiveKind::reduce_scatter, partials, group});
  }
}

}  // namespace tpsim

// Seed 002's Pallas Mosaic GPU kernel: one persistent kernel (grid = SMs) per
// rank. At each step it multiplies the shard it holds while the TMA streams that
// shard's tiles, as they are loaded, to the previous rank; then one signal/wait
// round before the next step.
#include "common.hpp"
#include "tpsim/strategies/builders.hpp"

namespace tpsim {

using namespace strategy;

void build_allgather_matmul_fused(Dag& dag, const Scenario& s) {
  const Shards sh = shards_of(s);
  const int group = dag.new_group();
  for (int r = 0; r < sh.ranks; ++r) {
    const GemmProblem step{sh.rows, s.workload.n_total(), s.workload.k, s.dtype};
    dag.add(r, kCompute, "ag_mm.fused_kernel",
            FusedRingGemmOp{step, sh.ranks, wrap(r - 1, sh.ranks), sh.shard_bytes, group});
  }
}

}  // namespace tpsim

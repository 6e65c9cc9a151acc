// Seed 002's Pallas Mosaic GPU kernel: one persistent kernel (grid = SMs) per
// rank. At each step it multiplies the shard it holds while the TMA streams that
// shard's tiles, as they are loaded, to the previous rank; then one signal/wait
// round before the next step.
#include "regions.hpp"

namespace tpsim::strategy {

void gather_fused(Dag& dag, const Region& r) {
  // The kernel multiplies one operand shard against weights that share its
  // rows and K (Q, K, V concatenated). Consumers of another shape (a weight
  // gradient) are outside what it does: such regions keep NCCL + cuBLAS.
  GemmProblem step{r.gemms.front().shard.m, 0, r.gemms.front().shard.k, r.dtype};
  for (const auto& g : r.gemms) {
    if (g.shard.m != step.m || g.shard.k != step.k) return gather_baseline(dag, r);
    step.n += g.shard.n;
  }
  const ProcessGroup pg = dag.process_group(r.pg);
  const int group = dag.new_group(r.pg);
  for (int i = 0; i < pg.size(); ++i)
    dag.add(pg.rank(i), kCompute, r.name + ".fused_kernel", FusedRingGemmOp{step, pg.size(), pg.rank(i - 1), r.bytes, group});
}

}  // namespace tpsim::strategy

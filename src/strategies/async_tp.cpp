// PyTorch's symmetric-memory async TP (torch/distributed/_symmetric_memory):
// the collective is decomposed into copy-engine peer copies, the matmul into
// per-shard submatmuls, on two streams that alternate roles every step so a
// submatmul's partial last wave overlaps the next one.
#include "common.hpp"
#include "tpsim/strategies/builders.hpp"

namespace tpsim {

using namespace strategy;

namespace {
int step_stream(int step) { return step % 2 == 0 ? kCompute : kComm; }
}  // namespace

// fused_all_gather_matmul: barrier; copy the local shard into the symmetric
// buffer; barrier; local submatmul; then for each step pull the peer's shard
// with a copy engine and multiply it; copy the local shard into the output;
// join the streams; final barrier. `alternate` = false is the naive version
// (seed 001 figure 3): submatmuls on one stream, copies on the other.
static void build_ag(Dag& dag, const Scenario& s, bool alternate) {
  const Shards sh = shards_of(s);
  const int g = sh.ranks;
  const int start = dag.new_group(), ready = dag.new_group(), end = dag.new_group();
  for (int r = 0; r < g; ++r) {
    dag.add(r, kCompute, "ag_mm.barrier.start", BarrierOp{start});
    dag.add(r, kCompute, "ag_mm.copy_to_symm", ElementwiseOp{sh.shard_bytes, sh.shard_bytes});
    dag.add(r, kCompute, "ag_mm.barrier.ready", BarrierOp{ready});
    dag.join(r, kCompute, kComm, "ag_mm.fork");
    add_matmuls(dag, r, kCompute, sh.rows, s, fmt::format("ag_mm.matmul.shard{}", r));
    for (int step = 1; step < g; ++step) {
      const int peer = (r + step) % g;
      const int copy_stream = alternate ? step_stream(step) : kComm;
      const int mm_stream = alternate ? step_stream(step) : kCompute;
      dag.add(r, copy_stream, fmt::format("ag_mm.pull.shard{}", peer), CopyOp{peer, r, sh.shard_bytes});
      if (!alternate) dag.join(r, kComm, kCompute, fmt::format("ag_mm.arrived.shard{}", peer));
      add_matmuls(dag, r, mm_stream, sh.rows, s, fmt::format("ag_mm.matmul.shard{}", peer));
    }
    dag.add(r, alternate ? step_stream(g) : kComm, "ag_mm.copy_local_to_output", ElementwiseOp{sh.shard_bytes, sh.shard_bytes});
    dag.join(r, kComm, kCompute, "ag_mm.join");
    dag.add(r, kCompute, "ag_mm.barrier.end", BarrierOp{end});
  }
}

// fused_matmul_reduce_scatter: each step computes the rows destined for one peer
// and pushes them into that peer's symmetric buffer with a copy engine; after a
// barrier every rank sums the chunks it received (fp32 accumulation).
static void build_rs(Dag& dag, const Scenario& s, bool alternate) {
  const Shards sh = shards_of(s);
  const int g = sh.ranks;
  const int start = dag.new_group(), end = dag.new_group();
  for (int r = 0; r < g; ++r) {
    dag.add(r, kCompute, "mm_rs.barrier.start", BarrierOp{start});
    if (alternate) dag.join(r, kCompute, kComm, "mm_rs.fork");
    for (int step = 1; step < g; ++step) {
      const int peer = (r + step) % g;
      const int mm_stream = alternate ? step_stream(step) : kCompute;
      add_matmuls(dag, r, mm_stream, sh.rows, s, fmt::format("mm_rs.matmul.chunk{}", peer));
      if (!alternate) dag.join(r, kCompute, kComm, fmt::format("mm_rs.computed.chunk{}", peer));
      dag.add(r, alternate ? mm_stream : kComm, fmt::format("mm_rs.push.chunk{}", peer), CopyOp{r, peer, sh.chunk_bytes});
    }
    add_matmuls(dag, r, alternate ? step_stream(g) : kCompute, sh.rows, s, fmt::format("mm_rs.matmul.chunk{}", r));
    dag.join(r, kComm, kCompute, "mm_rs.join");
    dag.add(r, kCompute, "mm_rs.barrier.end", BarrierOp{end});
    dag.add(r, kCompute, "mm_rs.reduce", ElementwiseOp{g * sh.chunk_bytes, sh.chunk_bytes});
  }
}

void build_allgather_matmul_async_tp(Dag& dag, const Scenario& s) { build_ag(dag, s, true); }
void build_allgather_matmul_async_tp_single_stream(Dag& dag, const Scenario& s) { build_ag(dag, s, false); }
void build_matmul_reducescatter_async_tp(Dag& dag, const Scenario& s) { build_rs(dag, s, true); }
void build_matmul_reducescatter_async_tp_single_stream(Dag& dag, const Scenario& s) { build_rs(dag, s, false); }

}  // namespace tpsim

// PyTorch's symmetric-memory async TP (torch/distributed/_symmetric_memory):
// the collective is decomposed into copy-engine peer copies, the matmul into
// per-shard submatmuls, on two streams that alternate roles every step so a
// submatmul's partial last wave overlaps the next one.
#include <fmt/format.h>

#include "regions.hpp"

namespace tpsim::strategy {

namespace {
int step_stream(int step) { return step % 2 == 0 ? kCompute : kComm; }
}  // namespace

// fused_all_gather_matmul: barrier; copy the local shard into the symmetric
// buffer; barrier; local submatmuls; then for each step pull the peer's shard
// with a copy engine and multiply it; copy the local shard into the output;
// join the streams; final barrier. `alternate` = false is the naive version
// (seed 001 figure 3): submatmuls on one stream, copies on the other.
static void gather(Dag& dag, const Region& r, bool alternate) {
  const int g = r.ranks;
  const int start = dag.new_group(), ready = dag.new_group(), end = dag.new_group();
  for (int rank = 0; rank < g; ++rank) {
    dag.add(rank, kCompute, r.name + ".barrier.start", BarrierOp{start});
    dag.add(rank, kCompute, r.name + ".copy_to_symm", ElementwiseOp{r.bytes, r.bytes});
    dag.add(rank, kCompute, r.name + ".barrier.ready", BarrierOp{ready});
    dag.join(rank, kCompute, kComm, r.name + ".fork");
    add_gemms(dag, r, rank, kCompute, false, fmt::format("{}.matmul.shard{}", r.name, rank));
    for (int step = 1; step < g; ++step) {
      const int peer = (rank + step) % g;
      const int copy_stream = alternate ? step_stream(step) : kComm;
      const int mm_stream = alternate ? step_stream(step) : kCompute;
      dag.add(rank, copy_stream, fmt::format("{}.pull.shard{}", r.name, peer), CopyOp{peer, rank, r.bytes});
      if (!alternate) dag.join(rank, kComm, kCompute, fmt::format("{}.arrived.shard{}", r.name, peer));
      add_gemms(dag, r, rank, mm_stream, false, fmt::format("{}.matmul.shard{}", r.name, peer));
    }
    dag.add(rank, alternate ? step_stream(g) : kComm, r.name + ".copy_local_to_output", ElementwiseOp{r.bytes, r.bytes});
    dag.join(rank, kComm, kCompute, r.name + ".join");
    dag.add(rank, kCompute, r.name + ".barrier.end", BarrierOp{end});
  }
}

// fused_matmul_reduce_scatter: each step computes the rows destined for one peer
// and pushes them into that peer's symmetric buffer with a copy engine; after a
// barrier every rank sums the chunks it received (fp32 accumulation).
static void scatter(Dag& dag, const Region& r, bool alternate) {
  const int g = r.ranks;
  const int start = dag.new_group(), end = dag.new_group();
  for (int rank = 0; rank < g; ++rank) {
    dag.add(rank, kCompute, r.name + ".barrier.start", BarrierOp{start});
    if (alternate) dag.join(rank, kCompute, kComm, r.name + ".fork");
    for (int step = 1; step < g; ++step) {
      const int peer = (rank + step) % g;
      const int mm_stream = alternate ? step_stream(step) : kCompute;
      add_gemms(dag, r, rank, mm_stream, false, fmt::format("{}.matmul.chunk{}", r.name, peer));
      if (!alternate) dag.join(rank, kCompute, kComm, fmt::format("{}.computed.chunk{}", r.name, peer));
      dag.add(rank, alternate ? mm_stream : kComm, fmt::format("{}.push.chunk{}", r.name, peer), CopyOp{rank, peer, r.bytes});
    }
    add_gemms(dag, r, rank, alternate ? step_stream(g) : kCompute, false, fmt::format("{}.matmul.chunk{}", r.name, rank));
    dag.join(rank, kComm, kCompute, r.name + ".join");
    dag.add(rank, kCompute, r.name + ".barrier.end", BarrierOp{end});
    dag.add(rank, kCompute, r.name + ".reduce", ElementwiseOp{g * r.bytes, r.bytes});
  }
}

void gather_async_tp(Dag& dag, const Region& r) { gather(dag, r, true); }
void gather_async_tp_single_stream(Dag& dag, const Region& r) { gather(dag, r, false); }
void scatter_async_tp(Dag& dag, const Region& r) { scatter(dag, r, true); }
void scatter_async_tp_single_stream(Dag& dag, const Region& r) { scatter(dag, r, false); }

}  // namespace tpsim::strategy

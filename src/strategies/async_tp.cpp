// PyTorch's symmetric-memory async TP (torch/distributed/_symmetric_memory):
// the collective is decomposed into copy-engine peer copies, the matmul into
// per-shard submatmuls, on two streams that alternate roles every step so a
// submatmul's partial last wave overlaps the next one.
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "regions.hpp"

namespace tpsim::strategy {

namespace {

int step_stream(int step) { return step % 2 == 0 ? kCompute : kComm; }

// The group a region decomposes over, and how many of its ranks the DAG holds: all of them,
// or rank 0 alone where one GPU emulates a rank of a larger group.
int decomposition_size(const Region& r, const ProcessGroup& pg) { return r.emulated_group > 0 ? r.emulated_group : pg.size(); }
int ranks_built(const Region& r, const ProcessGroup& pg) { return r.emulated_group > 0 ? 1 : pg.size(); }

// A step's pull of a peer's buffer: a copy engine's peer copy, or where one GPU plays every
// peer, the same-device copy_ the emulation runs (an SM memcpy on Hopper, measured).
void add_pull(Dag& dag, const Region& r, const ProcessGroup& pg, int at, int stream, int peer, const std::string& name) {
  if (r.emulated_group > 0) dag.add(at, stream, name, ElementwiseOp{r.bytes, r.bytes});
  else dag.add(at, stream, name, CopyOp{pg.rank(peer), at, r.bytes});
}

}  // namespace

// fused_all_gather_matmul: barrier; copy the local shard into the symmetric
// buffer; barrier; local submatmuls; then for each step pull the peer's shard
// with a copy engine and multiply it; copy the local shard into the output;
// join the streams; final barrier. `alternate` = false is the naive version
// (seed 001 figure 3): submatmuls on one stream, copies on the other.
static void gather(Dag& dag, const Region& r, bool alternate) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int g = decomposition_size(r, pg);
  const int start = dag.new_group(r.pg), ready = dag.new_group(r.pg), end = dag.new_group(r.pg);
  for (int rank = 0; rank < ranks_built(r, pg); ++rank) {
    const int at = pg.rank(rank);  // `rank` indexes the group; `at` is the GPU
    dag.add(at, kCompute, r.name + ".barrier.start", BarrierOp{start});
    dag.add(at, kCompute, r.name + ".copy_to_symm", ElementwiseOp{r.bytes, r.bytes});
    dag.add(at, kCompute, r.name + ".barrier.ready", BarrierOp{ready});
    dag.join(at, kCompute, kComm, r.name + ".fork");
    add_gemms(dag, r, at, kCompute, false, fmt::format("{}.matmul.shard{}", r.name, rank));
    for (int step = 1; step < g; ++step) {
      const int peer = (rank + step) % g;
      const int copy_stream = alternate ? step_stream(step) : kComm;
      const int mm_stream = alternate ? step_stream(step) : kCompute;
      add_pull(dag, r, pg, at, copy_stream, peer, fmt::format("{}.pull.shard{}", r.name, peer));
      if (!alternate) dag.join(at, kComm, kCompute, fmt::format("{}.arrived.shard{}", r.name, peer));
      add_gemms(dag, r, at, mm_stream, false, fmt::format("{}.matmul.shard{}", r.name, peer));
    }
    dag.add(at, alternate ? step_stream(g) : kComm, r.name + ".copy_local_to_output", ElementwiseOp{r.bytes, r.bytes});
    dag.join(at, kComm, kCompute, r.name + ".join");
    dag.add(at, kCompute, r.name + ".barrier.end", BarrierOp{end});
  }
}

// fused_matmul_reduce_scatter, as _pipelined_produce_and_all2all runs it
// (torch/distributed/_symmetric_memory/__init__.py: the same sequence in a
// 2024-era copy and in 2026 main, 006b161). Barrier; then for step s = 1..G-1,
// odd steps on the backend stream and even ones on the current stream: the
// rows for rank+s are multiplied into the local symmetric buffer (double
// buffered), a barrier says every rank's buffer is ready, a copy engine pulls
// the rows for this rank from rank-s, and a second barrier says every peer has
// read the buffer before it is written again. The local rows come last; the
// streams join, a final barrier, and the G stacked partials are summed.
// `alternate` = false is the naive version: every submatmul on one stream, the
// barriers and pulls on the other, each buffer reused only once it is free.
static void scatter(Dag& dag, const Region& r, bool alternate) {
  const ProcessGroup pg = dag.process_group(r.pg);
  const int g = decomposition_size(r, pg);
  const int start = dag.new_group(r.pg), end = dag.new_group(r.pg);
  std::vector<std::pair<int, int>> step_barriers(static_cast<std::size_t>(g));
  for (int step = 1; step < g; ++step) step_barriers[step] = {dag.new_group(r.pg), dag.new_group(r.pg)};
  // PyTorch puts a short sleep kernel on the current stream (at step 2, or after the
  // loop when G = 2) so that the backend stream's submatmul is scheduled first on
  // every rank: a one-block kernel with nothing to do.
  const auto sleep = [&](int at) { dag.add(at, kCompute, r.name + ".sleep", ElementwiseOp{0, 0}); };
  for (int rank = 0; rank < ranks_built(r, pg); ++rank) {
    const int at = pg.rank(rank);  // `rank` indexes the group; `at` is the GPU
    dag.add(at, kCompute, r.name + ".barrier.start", BarrierOp{start});
    dag.join(at, kCompute, kComm, r.name + ".fork");
    std::vector<int> buffer_free(static_cast<std::size_t>(g), -1);
    for (int step = 1; step < g; ++step) {
      const int dest = (rank + step) % g, src = wrap(rank - step, g);
      const int mm_stream = alternate ? step_stream(step) : kCompute;
      const int comm_stream = alternate ? mm_stream : kComm;
      if (alternate && step == 2) sleep(at);
      if (!alternate && step >= 3)
        dag.add(at, kCompute, fmt::format("{}.wait_buffer.step{}", r.name, step - 2), WaitOp{buffer_free[step - 2]});
      add_gemms(dag, r, at, mm_stream, false, fmt::format("{}.matmul.chunk{}", r.name, dest));
      if (!alternate) dag.join(at, kCompute, kComm, fmt::format("{}.computed.chunk{}", r.name, dest));
      dag.add(at, comm_stream, fmt::format("{}.barrier.ready.step{}", r.name, step), BarrierOp{step_barriers[step].first});
      add_pull(dag, r, pg, at, comm_stream, src, fmt::format("{}.pull.from{}", r.name, src));
      dag.add(at, comm_stream, fmt::format("{}.barrier.read.step{}", r.name, step), BarrierOp{step_barriers[step].second});
      if (!alternate) {
        buffer_free[step] = dag.new_event();
        dag.add(at, kComm, fmt::format("{}.buffer_free.step{}", r.name, step), RecordOp{buffer_free[step]});
      }
    }
    if (alternate && g == 2) sleep(at);
    add_gemms(dag, r, at, kCompute, false, fmt::format("{}.matmul.chunk{}", r.name, rank));
    dag.join(at, kComm, kCompute, r.name + ".join");
    dag.add(at, kCompute, r.name + ".barrier.end", BarrierOp{end});
    dag.add(at, kCompute, r.name + ".reduce", ReduceOp{g, r.bytes, r.reduction});
  }
}

void gather_async_tp(Dag& dag, const Region& r) { gather(dag, r, true); }
void gather_async_tp_single_stream(Dag& dag, const Region& r) { gather(dag, r, false); }
void scatter_async_tp(Dag& dag, const Region& r) { scatter(dag, r, true); }
void scatter_async_tp_single_stream(Dag& dag, const Region& r) { scatter(dag, r, false); }

}  // namespace tpsim::strategy

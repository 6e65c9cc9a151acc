// PyTorch's symmetric-memory async TP (torch/distributed/_symmetric_memory):
// the collective is decomposed into copy-engine peer copies, the matmul into
// per-shard submatmuls, on two streams that alternate roles every step so a
// submatmul's partial last wave overlaps the next one.
#include <fmt/format.h>

#include "tpsim/strategies/builders.hpp"

namespace tpsim {

namespace {
constexpr int kCurrent = 0;  // torch.cuda.current_stream()
constexpr int kBackend = 1;  // the backend stream
int step_stream(int step) { return step % 2 == 0 ? kCurrent : kBackend; }
}  // namespace

// fused_all_gather_matmul: barrier; copy the local shard into the symmetric
// buffer; barrier; local submatmul; then for each step pull the peer's shard
// with a copy engine and multiply it; copy the local shard into the output;
// join the streams; final barrier.
void build_allgather_matmul_async_tp(Dag& dag, const Scenario& s) {
  const auto& w = s.workload;
  const int g = s.gpus;
  const std::int64_t rows = w.m / g;
  const double shard_bytes = static_cast<double>(rows) * w.k * dtype_bytes(s.dtype);
  const int start_barrier = dag.new_group(), ready_barrier = dag.new_group(), end_barrier = dag.new_group();
  for (int r = 0; r < g; ++r) {
    dag.add(r, kCurrent, "ag_mm.barrier.start", BarrierOp{start_barrier});
    dag.add(r, kCurrent, "ag_mm.copy_to_symm", ElementwiseOp{shard_bytes, shard_bytes});
    dag.add(r, kCurrent, "ag_mm.barrier.ready", BarrierOp{ready_barrier});
    dag.join(r, kCurrent, kBackend, "ag_mm.fork");
    dag.add(r, kCurrent, fmt::format("ag_mm.matmul.shard{}", r), GemmOp{{rows, w.n, w.k, s.dtype}});
    for (int step = 1; step < g; ++step) {
      const int peer = (r + step) % g;
      const int st = step_stream(step);
      dag.add(r, st, fmt::format("ag_mm.pull.shard{}", peer), CopyOp{peer, r, shard_bytes});
      dag.add(r, st, fmt::format("ag_mm.matmul.shard{}", peer), GemmOp{{rows, w.n, w.k, s.dtype}});
    }
    dag.add(r, step_stream(g), "ag_mm.copy_local_to_output", ElementwiseOp{shard_bytes, shard_bytes});
    dag.join(r, kBackend, kCurrent, "ag_mm.join");
    dag.add(r, kCurrent, "ag_mm.barrier.end", BarrierOp{end_barrier});
  }
}

// fused_matmul_reduce_scatter: each step computes the chunk of rows destined for
// one peer and pushes it into that peer's symmetric buffer with a copy engine;
// after a barrier every rank sums the chunks it received (fp32 accumulation).
void build_matmul_reducescatter_async_tp(Dag& dag, const Scenario& s) {
  const auto& w = s.workload;
  const int g = s.gpus;
  const std::int64_t rows = w.m / g;
  const double chunk_bytes = static_cast<double>(rows) * w.n * dtype_bytes(s.dtype);
  const int start_barrier = dag.new_group(), end_barrier = dag.new_group();
  for (int r = 0; r < g; ++r) {
    dag.add(r, kCurrent, "mm_rs.barrier.start", BarrierOp{start_barrier});
    dag.join(r, kCurrent, kBackend, "mm_rs.fork");
    for (int step = 1; step < g; ++step) {
      const int peer = (r + step) % g;
      const int st = step_stream(step);
      dag.add(r, st, fmt::format("mm_rs.matmul.chunk{}", peer), GemmOp{{rows, w.n, w.k, s.dtype}});
      dag.add(r, st, fmt::format("mm_rs.push.chunk{}", peer), CopyOp{r, peer, chunk_bytes});
    }
    dag.add(r, step_stream(g), fmt::format("mm_rs.matmul.chunk{}", r), GemmOp{{rows, w.n, w.k, s.dtype}});
    dag.join(r, kBackend, kCurrent, "mm_rs.join");
    dag.add(r, kCurrent, "mm_rs.barrier.end", BarrierOp{end_barrier});
    dag.add(r, kCurrent, "mm_rs.reduce", ElementwiseOp{g * chunk_bytes, chunk_bytes});
  }
}

}  // namespace tpsim

namespace tpsim {

// The naive decomposition (seed 001 figure 3): every submatmul on one compute
// stream, every peer copy on one copy stream, an event per step. Partial waves
// of consecutive submatmuls cannot overlap, so a decomposed GEMM pays N+S waves.
void build_allgather_matmul_async_tp_single_stream(Dag& dag, const Scenario& s) {
  const auto& w = s.workload;
  const int g = s.gpus;
  const std::int64_t rows = w.m / g;
  const double shard_bytes = static_cast<double>(rows) * w.k * dtype_bytes(s.dtype);
  const int start_barrier = dag.new_group(), ready_barrier = dag.new_group(), end_barrier = dag.new_group();
  for (int r = 0; r < g; ++r) {
    dag.add(r, kCurrent, "ag_mm.barrier.start", BarrierOp{start_barrier});
    dag.add(r, kCurrent, "ag_mm.copy_to_symm", ElementwiseOp{shard_bytes, shard_bytes});
    dag.add(r, kCurrent, "ag_mm.barrier.ready", BarrierOp{ready_barrier});
    dag.join(r, kCurrent, kBackend, "ag_mm.fork");
    dag.add(r, kCurrent, fmt::format("ag_mm.matmul.shard{}", r), GemmOp{{rows, w.n, w.k, s.dtype}});
    for (int step = 1; step < g; ++step) {
      const int peer = (r + step) % g;
      dag.add(r, kBackend, fmt::format("ag_mm.pull.shard{}", peer), CopyOp{peer, r, shard_bytes});
      dag.join(r, kBackend, kCurrent, fmt::format("ag_mm.arrived.shard{}", peer));
      dag.add(r, kCurrent, fmt::format("ag_mm.matmul.shard{}", peer), GemmOp{{rows, w.n, w.k, s.dtype}});
    }
    dag.add(r, kBackend, "ag_mm.copy_local_to_output", ElementwiseOp{shard_bytes, shard_bytes});
    dag.join(r, kBackend, kCurrent, "ag_mm.join");
    dag.add(r, kCurrent, "ag_mm.barrier.end", BarrierOp{end_barrier});
  }
}

void build_matmul_reducescatter_async_tp_single_stream(Dag& dag, const Scenario& s) {
  const auto& w = s.workload;
  const int g = s.gpus;
  const std::int64_t rows = w.m / g;
  const double chunk_bytes = static_cast<double>(rows) * w.n * dtype_bytes(s.dtype);
  const int start_barrier = dag.new_group(), end_barrier = dag.new_group();
  for (int r = 0; r < g; ++r) {
    dag.add(r, kCurrent, "mm_rs.barrier.start", BarrierOp{start_barrier});
    for (int step = 1; step < g; ++step) {
      const int peer = (r + step) % g;
      dag.add(r, kCurrent, fmt::format("mm_rs.matmul.chunk{}", peer), GemmOp{{rows, w.n, w.k, s.dtype}});
      dag.join(r, kCurrent, kBackend, fmt::format("mm_rs.computed.chunk{}", peer));
      dag.add(r, kBackend, fmt::format("mm_rs.push.chunk{}", peer), CopyOp{r, peer, chunk_bytes});
    }
    dag.add(r, kCurrent, fmt::format("mm_rs.matmul.chunk{}", r), GemmOp{{rows, w.n, w.k, s.dtype}});
    dag.join(r, kBackend, kCurrent, "mm_rs.join");
    dag.add(r, kCurrent, "mm_rs.barrier.end", BarrierOp{end_barrier});
    dag.add(r, kCurrent, "mm_rs.reduce", ElementwiseOp{g * chunk_bytes, chunk_bytes});
  }
}

}  // namespace tpsim

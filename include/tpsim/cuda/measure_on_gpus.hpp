#pragma once
// Taking one calibration measurement on this machine's GPUs, as `tpsim microbench`
// does: its DAG run by the CUDA backend, or for the launch row a tiny kernel timed on
// the host (CUDA events cannot see the host's launch overhead).
#include <optional>

#include <fmt/format.h>

#include "tpsim/calibration/library_kernel.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/cuda/gpu_executor.hpp"

namespace tpsim {

// The row with its measured time in microseconds and how it was timed (CUDA events around
// each launch, but for the launch row), as a burst: a row's few repeats, between the host's
// setup of each, are over before the power limit's averaging lowers the clock. Throws GpuError.
inline Measurement measure_on_gpus(Measurement m, const GpuRunOptions& options) {
  if (m.kind == MeasurementKind::launch) {
    m.time_us = time_tiny_kernel_us(options);
    return m;
  }
  const MeasurementDag md = measurement_dag(m);
  m.time_us = median_span_us(run_on_gpus(md.dag, plan_launches(md.dag), options), md.spanned(), md.from_host_start);
  m.timing = MeasurementTiming::events;
  m.burst_clock = true;
  return m;
}

// One row of `tpsim microbench`: measure_on_gpus, with the cuBLASLt algorithm a GEMM ran, and
// for one that is not the heuristic's first, or made to run in another cluster, the plan it
// names, which prices the row; nullopt for an algorithm this machine's heuristic does not
// offer, or a cluster it does not run in. Throws GpuError.
inline std::optional<Measurement> measure_microbench_row(const Measurement& row, const GpuRunOptions& options) {
  if (row.gemm.heuristic_rank > 0 && row.gemm.heuristic_rank >= cuda_gemm_algorithm_count(row.gemm)) return std::nullopt;
  if (row.gemm.cluster.given() && !cuda_gemm_runs_in_cluster(row.gemm)) return std::nullopt;
  Measurement m = measure_on_gpus(row, options);
  if (m.kind == MeasurementKind::gemm || m.kind == MeasurementKind::gemm_pair) m.kernel = cuda_gemm_algo(m.gemm);
  if (m.gemm.heuristic_rank > 0 || m.gemm.cluster.given()) {
    const auto plan = plan_of_lt_algorithm(m.kernel);
    if (!plan) throw GpuError(fmt::format("cuBLASLt's algorithm names no tile and depth tpsim can price ({})", m.kernel));
    m.gemm.named_plan = *plan;
  }
  return m;
}

}  // namespace tpsim

#pragma once
// Taking one calibration measurement on this machine's GPUs, as `tpsim microbench`
// does: its DAG run by the CUDA backend, or for the launch row a tiny kernel timed on
// the host (CUDA events cannot see the host's launch overhead).
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

}  // namespace tpsim

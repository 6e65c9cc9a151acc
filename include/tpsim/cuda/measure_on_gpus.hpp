#pragma once
// Taking one calibration measurement on this machine's GPUs, as `tpsim microbench`
// does: its DAG run by the CUDA backend, or for the launch row a tiny kernel timed on
// the host (CUDA events cannot see the host's launch overhead).
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/cuda/gpu_executor.hpp"

namespace tpsim {

// The measured time in microseconds. Throws GpuError.
inline double measure_on_gpus(const Measurement& m, const GpuRunOptions& options) {
  if (m.kind == MeasurementKind::launch) return time_tiny_kernel_us(options);
  const MeasurementDag md = measurement_dag(m);
  return median_span_us(run_on_gpus(md.dag, plan_launches(md.dag), options), md.spanned(), md.from_host_start);
}

}  // namespace tpsim

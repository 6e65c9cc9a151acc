#pragma once
// What each measurement means as an op DAG: the same DAG is simulated to
// predict the measurement and run by the CUDA backend to take it (microbench).
#include "tpsim/calibration/measurement.hpp"
#include "tpsim/dag/dag.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/runtime/timeline.hpp"

namespace tpsim {

struct MeasurementDag {
  Dag dag;
  OpId target = 0;               // the op whose time is measured
  std::vector<OpId> beside = {}; // ops run beside it whose ends also bound the span (gemm_pair)
  bool from_host_start = false;  // launch: from time zero (the host's first call), not from the op's start
  // What is measured: the target, and what runs beside it, from first start to last end.
  std::vector<OpId> spanned() const;
};

// Not for scenario measurements (their DAG is the scenario's).
MeasurementDag measurement_dag(const Measurement& m);
// The measured span of a finished run of `md`.
double measured_span_us(const MeasurementDag& md, const Timeline& tl);
// What the simulator predicts for `m` on `hw`.
double predict_us(const Measurement& m, const HardwareSpec& hw);
// The same for many; scenario measurements sharing one Scenario are simulated once.
std::vector<double> predict_all_us(const std::vector<Measurement>& ms, const HardwareSpec& hw);
// The op a scenario measurement names, or throws InputError naming it.
OpId find_named_op(const Dag& dag, const Measurement& m);

}  // namespace tpsim

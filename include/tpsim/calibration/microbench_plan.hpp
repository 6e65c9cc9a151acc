#pragma once
// What `tpsim microbench` measures: the shapes and sizes calibration needs to
// pin each physical parameter (times left 0 until measured).
#include <vector>

#include "tpsim/calibration/measurement.hpp"

namespace tpsim {

// GEMMs across the wave staircase and across K, async TP's thin submatmuls (alone, in
// pairs, and under the heuristic's next algorithms), local copies, a launch; with 2+ GPUs
// also peer copies, all-gathers and reduce-scatters over `gpus`, a barrier, and GEMMs
// running beside copy-engine copies and beside an NCCL kernel.
std::vector<Measurement> microbench_measurements(int gpus, Dtype dtype);

}  // namespace tpsim

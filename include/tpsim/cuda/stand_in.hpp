#pragma once
// Ops the CUDA backend cannot run itself (flash attention, the fused ring GEMM)
// can be stood in for, on request, by a kernel that holds every SM for the op's
// simulated time: the rest of a transformer layer is then measured on real GPUs
// in a realistic schedule, and the stand-ins are marked as such everywhere (the
// result JSON, the trace, and calibration, which never learns from them).
#include <map>
#include <string>

#include "tpsim/dag/dag.hpp"
#include "tpsim/runtime/timeline.hpp"

namespace tpsim {

// Whether the CUDA backend runs this op itself.
bool gpu_runs(const Op& op);

// The first op of `dag` the backend cannot run, as "op \"NAME\" (KIND)"; "" when there is none.
std::string first_op_gpu_cannot_run(const Dag& dag);

// For every op the backend cannot run: its simulated duration (end - start) in us,
// from a simulation of the same DAG. Throws std::invalid_argument when the timeline
// does not belong to the DAG.
std::map<OpId, double> stand_in_durations_us(const Dag& dag, const Timeline& simulated);

}  // namespace tpsim

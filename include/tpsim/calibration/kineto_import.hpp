#pragma once
// PyTorch profiler (Kineto) Chrome traces as measurements. GEMM kernels are
// found through the aten::mm / aten::addmm / aten::_scaled_mm op that launched
// them ("External id"), whose "Input Dims" and "Input type" give the shape
// (profile with record_shapes=True). All-gather and reduce-scatter kernels are
// sized by "Collective name", "In msg nelems", "Out msg nelems", "Group size"
// (or "Process Group Ranks") and "dtype": on the kernel, or, in older traces,
// only on the record_param_comms op it is linked to; kernels
// sized nowhere are left out. Peer copies ("Memcpy PtoP", category gpu_memcpy)
// carry their "bytes". A GEMM that overlapped an NCCL kernel or a peer copy on
// its GPU is left out (it lost SMs or bandwidth to it; the measurement's source
// says how many). Repeats of one shape become one measurement at the median.
#include <string>
#include <vector>

#include "tpsim/calibration/measurement.hpp"

namespace tpsim {

std::vector<Measurement> import_kineto_trace(const Json& j, const std::string& source);

}  // namespace tpsim

#pragma once
// PyTorch profiler (Kineto) Chrome traces as measurements. GEMM kernels are
// found through the aten::mm / aten::addmm op that launched them ("External id"),
// whose "Input Dims" and "Input type" give the shape (profile with
// record_shapes=True); NCCL kernels carry "Collective name", "In msg nelems",
// "Out msg nelems", "Group size" and "dtype"; peer copies ("Memcpy PtoP", category
// gpu_memcpy) their "bytes". Repeats of one shape become one
// measurement at the median duration.
#include <string>
#include <vector>

#include "tpsim/calibration/measurement.hpp"

namespace tpsim {

std::vector<Measurement> import_kineto_trace(const Json& j, const std::string& source);

}  // namespace tpsim

#pragma once
// The plan a cuBLASLt algorithm names, as `tpsim microbench` records it ("cuBLASLt algo 66, tile
// 64x80, split-K 2, stages 64xAUTO, cluster 1x4x1, ..."): the tile's rows x columns of the
// output, its K depth (the stages'), the split-K slices and the thread-block cluster, as
// tools/cublas_plans.py reads the same records.
#include <optional>
#include <string>

#include "tpsim/cost/gemm_cost.hpp"

namespace tpsim {

// nullopt where the record names no tile (UNDEFINED, an id the header had no name for) or no
// stage depth.
std::optional<GemmProblem::NamedPlan> plan_of_lt_algorithm(const std::string& kernel);

}  // namespace tpsim

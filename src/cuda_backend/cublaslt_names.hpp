#pragma once
// cuBLASLt's tile, stage and cluster enumerators by name: a table CMake generates from the
// cublasLt.h the backend is built against (cublaslt_names.inc), so the kernel the backend
// reports reads "tile 64x80, stages 64xAUTO, cluster 1x4x1" for whatever shapes that CUDA adds.
#include <string>

#include <fmt/format.h>

namespace tpsim::gpu {

// The header's prefixes: CUBLASLT_MATMUL_TILE_..., CUBLASLT_MATMUL_STAGES_..., CUBLASLT_CLUSTER_SHAPE_...
enum class LtEnum { MATMUL_TILE, MATMUL_STAGES, CLUSTER_SHAPE };

struct LtName {
  LtEnum kind;
  unsigned value;
  const char* name;  // what follows the prefix: "64x80", "64xAUTO", "2x4x1"
};

inline constexpr LtName kLtNames[] = {
#include "cublaslt_names.inc"
};

// The enumerator's name; 0 is the header's UNDEFINED (a cluster's AUTO); an unknown value by number.
inline std::string lt_name(LtEnum kind, unsigned value) {
  if (value == 0) return kind == LtEnum::CLUSTER_SHAPE ? "auto" : "undefined";
  for (const LtName& n : kLtNames)
    if (n.kind == kind && n.value == value) return n.name;
  return fmt::format("id {}", value);
}

}  // namespace tpsim::gpu

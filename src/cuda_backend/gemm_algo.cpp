// Which kernel cuBLASLt's heuristic gives a GEMM: the algorithm the backend runs, read
// back through cublasLtMatmulAlgoConfigGetAttribute, so measured GEMM times come with the
// tile and split-K the vendor chose (what tpsim's own tile choice is checked against), and
// how many algorithms the heuristic offers (a microbench times the others too), and whether
// one runs in a cluster it was not given (a microbench times that too).
#include <cstdint>

#include <fmt/format.h>

#include "cublaslt_names.hpp"
#include "gpu_setup.hpp"

namespace tpsim {

namespace {

template <typename T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  T value{};
  std::size_t written = 0;
  TPSIM_GPU_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof value, &written));
  return value;
}

// `read` of the algorithm cuBLASLt's heuristic gives `p` on device 0 (see plan_gemm); whatever
// was created is released, whether `read` returns or throws.
template <typename Read>
auto with_planned_gemm(const GemmProblem& p, Read read) {
  if (cuda_device_count() < 1) throw GpuError("no CUDA device found");
  TPSIM_GPU_CHECK(cudaSetDevice(0));
  cublasLtHandle_t lt = nullptr;
  TPSIM_GPU_CHECK(cublasLtCreate(&lt));
  gpu::LtGemm g;
  try {
    g = gpu::plan_gemm(lt, p);
    auto out = read(lt, g);
    gpu::destroy_gemm(g);
    cublasLtDestroy(lt);
    return out;
  } catch (...) {
    gpu::destroy_gemm(g);
    cublasLtDestroy(lt);
    throw;
  }
}

}  // namespace

std::string cuda_gemm_algo(const GemmProblem& p) {
  return with_planned_gemm(p, [](cublasLtHandle_t, const gpu::LtGemm& g) {
    const cublasLtMatmulAlgo_t& a = g.algo;
    return fmt::format("cuBLASLt algo {}, tile {}, split-K {}, stages {}, cluster {}, swizzle {}, reduction scheme {}",
                       config<std::int32_t>(a, CUBLASLT_ALGO_CONFIG_ID),
                       gpu::lt_name(gpu::LtEnum::MATMUL_TILE, config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID)),
                       config<std::int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                       gpu::lt_name(gpu::LtEnum::MATMUL_STAGES, config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID)),
                       gpu::lt_name(gpu::LtEnum::CLUSTER_SHAPE, config<std::uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)),
                       config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                       config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
  });
}

int cuda_gemm_algorithm_count(const GemmProblem& p) {
  GemmProblem first = p;
  first.heuristic_rank = 0;
  first.cluster = {};
  return with_planned_gemm(first, [](cublasLtHandle_t, const gpu::LtGemm& g) { return g.offered; });
}

bool cuda_gemm_runs_in_cluster(const GemmProblem& p) {
  GemmProblem as_given = p;
  as_given.cluster = {};
  return with_planned_gemm(as_given, [&](cublasLtHandle_t lt, gpu::LtGemm& g) { return gpu::run_in_cluster(lt, g, p.cluster); });
}

}  // namespace tpsim

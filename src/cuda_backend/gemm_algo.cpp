// Which kernel cuBLASLt's heuristic gives a GEMM: the algorithm the backend runs, read
// back through cublasLtMatmulAlgoConfigGetAttribute, so measured GEMM times come with the
// tile and split-K the vendor chose (what tpsim's own tile choice is checked against).
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "gpu_setup.hpp"

namespace tpsim {

namespace {

// Tile and cluster names of the enumerators Hopper's and Ampere's kernels use; the rest
// are reported by number (cublasLtMatmulTile_t, cublasLtClusterShape_t in cublasLt.h).
std::string tile_name(std::uint32_t id) {
  static const std::pair<cublasLtMatmulTile_t, const char*> kTiles[] = {
      {CUBLASLT_MATMUL_TILE_UNDEFINED, "undefined"}, {CUBLASLT_MATMUL_TILE_32x32, "32x32"},
      {CUBLASLT_MATMUL_TILE_32x64, "32x64"},         {CUBLASLT_MATMUL_TILE_64x32, "64x32"},
      {CUBLASLT_MATMUL_TILE_32x128, "32x128"},       {CUBLASLT_MATMUL_TILE_64x64, "64x64"},
      {CUBLASLT_MATMUL_TILE_128x32, "128x32"},       {CUBLASLT_MATMUL_TILE_64x128, "64x128"},
      {CUBLASLT_MATMUL_TILE_128x64, "128x64"},       {CUBLASLT_MATMUL_TILE_64x256, "64x256"},
      {CUBLASLT_MATMUL_TILE_128x128, "128x128"},     {CUBLASLT_MATMUL_TILE_256x64, "256x64"},
      {CUBLASLT_MATMUL_TILE_128x256, "128x256"},     {CUBLASLT_MATMUL_TILE_256x128, "256x128"}};
  for (const auto& [tile, name] : kTiles)
    if (static_cast<std::uint32_t>(tile) == id) return name;
  return fmt::format("id {}", id);
}

std::string cluster_name(std::uint16_t id) {
  static const std::pair<cublasLtClusterShape_t, const char*> kShapes[] = {
      {CUBLASLT_CLUSTER_SHAPE_AUTO, "auto"}, {CUBLASLT_CLUSTER_SHAPE_1x1x1, "1x1x1"}, {CUBLASLT_CLUSTER_SHAPE_2x1x1, "2x1x1"},
      {CUBLASLT_CLUSTER_SHAPE_1x2x1, "1x2x1"}, {CUBLASLT_CLUSTER_SHAPE_2x2x1, "2x2x1"}, {CUBLASLT_CLUSTER_SHAPE_4x1x1, "4x1x1"},
      {CUBLASLT_CLUSTER_SHAPE_1x4x1, "1x4x1"}};
  for (const auto& [shape, name] : kShapes)
    if (static_cast<std::uint16_t>(shape) == id) return name;
  return fmt::format("id {}", id);
}

template <typename T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  T value{};
  std::size_t written = 0;
  TPSIM_GPU_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof value, &written));
  return value;
}

}  // namespace

std::string cuda_gemm_algo(const GemmProblem& p) {
  if (cuda_device_count() < 1) throw GpuError("no CUDA device found");
  TPSIM_GPU_CHECK(cudaSetDevice(0));
  cublasLtHandle_t lt = nullptr;
  TPSIM_GPU_CHECK(cublasLtCreate(&lt));
  gpu::LtGemm g;
  try {
    g = gpu::plan_gemm(lt, p);
  } catch (...) {
    cublasLtDestroy(lt);
    throw;
  }
  std::string out;
  try {
    const cublasLtMatmulAlgo_t& a = g.algo;
    out = fmt::format("cuBLASLt algo {}, tile {}, split-K {}, stages id {}, cluster {}, swizzle {}, reduction scheme {}",
                      config<std::int32_t>(a, CUBLASLT_ALGO_CONFIG_ID), tile_name(config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID)),
                      config<std::int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                      cluster_name(config<std::uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)),
                      config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                      config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
  } catch (...) {
    gpu::destroy_gemm(g);
    cublasLtDestroy(lt);
    throw;
  }
  gpu::destroy_gemm(g);
  cublasLtDestroy(lt);
  return out;
}

}  // namespace tpsim

#pragma once
// The CUDA backend is a plugin, libtpsim_cuda_backend.so, loaded only when a command
// runs GPUs (measure, microbench): `run` and `sweep` then start without loading
// cudart, cuBLASLt and NCCL, and work on machines that lack them. Plugin and loader
// are built together, so the table holds C++ function pointers; `abi` catches a
// plugin left over from another build.
#include "tpsim/cuda/gpu_executor.hpp"

namespace tpsim {

inline constexpr int kCudaBackendAbi = 4;

struct CudaBackendApi {
  int abi = kCudaBackendAbi;
  int (*device_count)() = nullptr;
  std::string (*device_name)(int) = nullptr;
  std::vector<int> (*sm_counts)(int) = nullptr;
  double (*time_tiny_kernel_us)(const GpuRunOptions&) = nullptr;
  std::vector<std::vector<OpSample>> (*run_on_gpus)(const Dag&, const LaunchPlan&, const GpuRunOptions&) = nullptr;
  std::string (*gemm_algo)(const GemmProblem&) = nullptr;
  int (*gemm_algorithm_count)(const GemmProblem&) = nullptr;
  bool (*gemm_runs_in_cluster)(const GemmProblem&) = nullptr;
};

}  // namespace tpsim

// The plugin's one exported symbol.
extern "C" const tpsim::CudaBackendApi* tpsim_cuda_backend();

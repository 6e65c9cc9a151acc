// The plugin's entry point: the backend's functions, for the loader in the executable.
#include "backend_api.hpp"

extern "C" __attribute__((visibility("default"))) const tpsim::CudaBackendApi* tpsim_cuda_backend() {
  static const tpsim::CudaBackendApi api{tpsim::kCudaBackendAbi, &tpsim::cuda_device_count, &tpsim::cuda_device_name,
                                         &tpsim::cuda_sm_counts, &tpsim::time_tiny_kernel_us, &tpsim::run_on_gpus,
                                         &tpsim::cuda_gemm_algo, &tpsim::cuda_gemm_algorithm_count,
                                         &tpsim::cuda_gemm_runs_in_cluster};
  return &api;
}

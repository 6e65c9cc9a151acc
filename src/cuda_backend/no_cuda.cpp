// The CUDA backend's entry points in a build without CUDA (-DTPSIM_CUDA=OFF, or
// AUTO on a machine without nvcc, cuBLASLt and NCCL).
#include "tpsim/cuda/gpu_executor.hpp"

namespace tpsim {

bool cuda_backend_built() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return ""; }
std::vector<int> cuda_sm_counts(int devices) { return std::vector<int>(static_cast<std::size_t>(devices), 0); }

namespace {

[[noreturn]] void no_backend() {
  throw GpuError("this tpsim was built without the CUDA backend (configure with -DTPSIM_CUDA=ON on a machine with the CUDA toolkit, cuBLASLt and NCCL)");
}

}  // namespace

double time_tiny_kernel_us(const GpuRunOptions&) { no_backend(); }

std::vector<std::vector<OpSample>> run_on_gpus(const Dag&, const LaunchPlan&, const GpuRunOptions&) { no_backend(); }

}  // namespace tpsim

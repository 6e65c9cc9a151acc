// The executable's side of the CUDA backend: the first call that needs a GPU loads
// the plugin (see backend_api.hpp); until then no CUDA library is touched.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "backend_api.hpp"
#include "tpsim/io/install_paths.hpp"

namespace tpsim {

namespace {

namespace fs = std::filesystem;

constexpr const char* kPluginFile = "libtpsim_cuda_backend.so";

struct Backend {
  const CudaBackendApi* api = nullptr;
  std::string why_not;  // when api is null
};

// Where the plugin may be: $TPSIM_CUDA_BACKEND, beside the executable (a build
// tree), ../lib/tpsim/ from it (an installed tree), then where this build put it.
// (Unused in a build without the backend, where load() says so at once.)
[[maybe_unused]] std::vector<std::string> candidates() {
  if (const char* env = std::getenv("TPSIM_CUDA_BACKEND"); env && *env) return {env};
  std::vector<std::string> out;
  if (const fs::path bin = executable_dir(); !bin.empty()) {
    out.push_back((bin / kPluginFile).string());
    out.push_back((bin.parent_path() / "lib" / "tpsim" / kPluginFile).string());
  }
#ifdef TPSIM_CUDA_BACKEND_BUILT
  out.push_back(TPSIM_CUDA_BACKEND_BUILT);
#endif
  return out;
}

Backend load() {
#ifndef TPSIM_CUDA_BACKEND_BUILT
  return {nullptr, "this tpsim was built without the CUDA backend (configure with -DTPSIM_CUDA=ON on a machine with the CUDA "
                   "toolkit, cuBLASLt and NCCL)"};
#else
  std::string tried;
  for (const std::string& path : candidates()) {
    if (!fs::exists(path)) {
      tried += fmt::format("; {}: no such file", path);
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = ::dlerror();
      return {nullptr, fmt::format("the CUDA backend {} could not be loaded ({}); run and sweep do not need it", path,
                                   err ? err : "unknown error")};
    }
    using Entry = const CudaBackendApi* (*)();
    const auto entry = reinterpret_cast<Entry>(::dlsym(handle, "tpsim_cuda_backend"));
    const CudaBackendApi* api = entry ? entry() : nullptr;
    if (!api || api->abi != kCudaBackendAbi)
      return {nullptr, fmt::format("{} is not this tpsim's CUDA backend (rebuild it with this tpsim)", path)};
    return {api, ""};
  }
  return {nullptr, fmt::format("the CUDA backend was not found{}; set TPSIM_CUDA_BACKEND to its path", tried)};
#endif
}

const Backend& backend() {
  static const Backend b = load();
  return b;
}

const CudaBackendApi& api_or_throw() {
  if (!backend().api) throw GpuError(backend().why_not);
  return *backend().api;
}

}  // namespace

bool cuda_backend_built() { return backend().api != nullptr; }
int cuda_device_count() { return backend().api ? backend().api->device_count() : 0; }
std::string cuda_device_name(int device) { return backend().api ? backend().api->device_name(device) : ""; }
std::vector<int> cuda_sm_counts(int devices) {
  return backend().api ? backend().api->sm_counts(devices) : std::vector<int>(static_cast<std::size_t>(devices), 0);
}
double time_tiny_kernel_us(const GpuRunOptions& options) { return api_or_throw().time_tiny_kernel_us(options); }
std::vector<std::vector<OpSample>> run_on_gpus(const Dag& dag, const LaunchPlan& plan, const GpuRunOptions& options) {
  return api_or_throw().run_on_gpus(dag, plan, options);
}
std::string cuda_gemm_algo(const GemmProblem& p) { return api_or_throw().gemm_algo(p); }
int cuda_gemm_algorithm_count(const GemmProblem& p) { return api_or_throw().gemm_algorithm_count(p); }
bool cuda_gemm_runs_in_cluster(const GemmProblem& p) { return api_or_throw().gemm_runs_in_cluster(p); }

}  // namespace tpsim

#pragma once
// Runs an op DAG on real GPUs (built with -DTPSIM_CUDA=ON or AUTO when CMake
// finds nvcc, cuBLASLt and NCCL): one host thread per GPU in this process, peer
// access between every pair, cuBLASLt for GEMMs, cudaMemcpyPeerAsync (copy
// engine) for peer copies, NCCL for collectives and send/recv (a communicator per
// process group, split from the world's), the DAG's streams and events as CUDA
// streams and events, barriers through peer-mapped flags, and memory-bound kernels
// of its own. Every op is bracketed by CUDA events timed
// against a start event each rank records right after a cross-GPU barrier.
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tpsim/cuda/launch_plan.hpp"
#include "tpsim/cuda/measured_timeline.hpp"

namespace tpsim {

// No usable GPU, too few of them, or a CUDA/cuBLAS/NCCL call failed.
// Thrown inside the backend plugin and caught in the executable: its type must be one
// type in both (default visibility, though the plugin hides the rest).
class __attribute__((visibility("default"))) GpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GpuRunOptions {
  int warmup = 3;
  int repeats = 10;
  // Ops the backend cannot run (see stand_in.hpp), each held on every SM for this many us.
  std::map<OpId, double> stand_in_us;
};

bool cuda_backend_built();
// Devices the driver reports (0 when there is no driver or no device).
int cuda_device_count();
std::string cuda_device_name(int device);
std::vector<int> cuda_sm_counts(int devices);

// A tiny kernel from the host's call to its end, as the host sees it (launch
// overhead + device latency + the kernel): median over `repeats`, after warm-up.
double time_tiny_kernel_us(const GpuRunOptions& options);

// The kernel cuBLASLt's heuristic gives `p` on device 0 (its first choice, or the one of
// p.heuristic_rank, in p.cluster where given), the one the backend runs: its algorithm id, tile, split-K, stages, cluster
// shape, swizzle and reduction scheme, in words. Throws GpuError.
std::string cuda_gemm_algo(const GemmProblem& p);
// How many algorithms cuBLASLt's heuristic offers for `p` on device 0 (at most
// GemmProblem::kHeuristicAlgorithms). Throws GpuError.
int cuda_gemm_algorithm_count(const GemmProblem& p);
// Whether that algorithm runs in p.cluster on device 0 (cuBLASLt accepts the cluster shape set on
// it: cublasLtMatmulAlgoCheck, within the backend's workspace). Throws GpuError.
bool cuda_gemm_runs_in_cluster(const GemmProblem& p);

// repeats[r][op]: each op's start and end in repeat r. Throws GpuError.
std::vector<std::vector<OpSample>> run_on_gpus(const Dag& dag, const LaunchPlan& plan, const GpuRunOptions& options);

}  // namespace tpsim

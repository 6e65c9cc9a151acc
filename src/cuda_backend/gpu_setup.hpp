#pragma once
// Everything one rank needs before its ops are timed: streams, events, an
// operand arena, cuBLASLt plans chosen ahead, barrier flags and its NCCL
// communicators (the world's, and one split from it per process group).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "gpu_kernels.hpp"
#include "tpsim/cuda/gpu_executor.hpp"

namespace tpsim::gpu {

void check(cudaError_t e, const char* what);
void check(cublasStatus_t s, const char* what);
void check(ncclResult_t r, const char* what);
#define TPSIM_GPU_CHECK(call) ::tpsim::gpu::check((call), #call)

struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t a_bytes = 0, b_bytes = 0, c_bytes = 0;
  int offered = 0;  // algorithms the heuristic offers (at most GemmProblem::kHeuristicAlgorithms)
};

struct RankState {
  int device = 0;
  int sms = 0;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> slots;               // the plan's event slots (no timing)
  std::vector<cudaEvent_t> op_start, op_end;    // per launch, timed
  cudaEvent_t t0 = nullptr;                     // the repeat's common start
  char* arena = nullptr;                        // operands of every op (contents do not matter)
  std::vector<void*> workspaces;                // cuBLASLt workspace per stream
  cublasLtHandle_t lt = nullptr;
  std::map<OpId, LtGemm> gemms;
  // [process group][rank]: a member of group pg writes its epoch into slot pg * ranks + member.
  int* flags = nullptr;
  int** flags_of_rank = nullptr;                // device array: every rank's flags
  std::vector<int> epochs;                      // per process group: barriers this rank has issued
  std::vector<gpu::BarrierMembers> members;     // per process group
  std::vector<ncclComm_t> comms;                // per process group: this rank's communicator, or null
  std::map<OpId, double> stand_in_us;           // ops held on every SM for their simulated time
  long long issue_ns = 0;                       // the host's time to issue the last repeat's launches
};

constexpr std::size_t kWorkspaceBytes = 32u << 20;

// cuBLASLt's layouts and descriptor for `p`, and the algorithm its heuristic ranks first (what
// the backend runs), or ranks p.heuristic_rank, in p.cluster where given. Throws GpuError when
// it has none such.
LtGemm plan_gemm(cublasLtHandle_t lt, const GemmProblem& p);
// Sets g's algorithm to run in `cluster` (cuBLASLt's cluster shape), where cuBLASLt accepts that
// (cublasLtMatmulAlgoCheck, within the workspace); false, and g unchanged, where it does not.
bool run_in_cluster(cublasLtHandle_t lt, LtGemm& g, GemmProblem::Cluster cluster);
void destroy_gemm(LtGemm& g);

// Operands start on 256-byte boundaries: cuBLASLt's heuristic assumes that alignment.
constexpr std::size_t kOperandAlignment = 256;
constexpr std::size_t aligned(std::size_t bytes) { return (bytes + kOperandAlignment - 1) / kOperandAlignment * kOperandAlignment; }

// Sets up every rank (peer access, memory, plans, NCCL). Throws GpuError.
std::vector<std::unique_ptr<RankState>> set_up_ranks(const Dag& dag, const LaunchPlan& plan,
                                                     const std::map<OpId, double>& stand_in_us);
void tear_down_ranks(std::vector<std::unique_ptr<RankState>>& ranks);

}  // namespace tpsim::gpu

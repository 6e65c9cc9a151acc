#include "gpu_setup.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "cublaslt_names.hpp"
#include "gpu_kernels.hpp"
#include "tpsim/cuda/stand_in.hpp"

namespace tpsim::gpu {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw GpuError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw GpuError(fmt::format("{}: cuBLAS status {}", what, static_cast<int>(s)));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw GpuError(fmt::format("{}: {}", what, ncclGetErrorString(r)));
}

namespace {

struct LtTypes {
  cudaDataType_t ab, cd;
  bool transpose_a;  // FP8 matmuls need A transposed (the "TN" layout)
};

LtTypes lt_types(Dtype d) {
  switch (d) {
    case Dtype::bf16: return {CUDA_R_16BF, CUDA_R_16BF, false};
    case Dtype::fp16: return {CUDA_R_16F, CUDA_R_16F, false};
    case Dtype::fp32: return {CUDA_R_32F, CUDA_R_32F, false};
    case Dtype::fp8: return {CUDA_R_8F_E4M3, CUDA_R_16BF, true};
  }
  return {CUDA_R_16BF, CUDA_R_16BF, false};
}

std::size_t type_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : t == CUDA_R_8F_E4M3 ? 1 : 2; }


// The operand bytes one launch touches on its rank (the arena holds the largest).
double launch_bytes(const Op& op, const Dag& dag) {
  if (const auto* g = std::get_if<GemmOp>(&op.payload)) {
    const double e = dtype_bytes(g->problem.dtype), c = g->problem.dtype == Dtype::fp8 ? 2 : e;
    const auto& p = g->problem;
    return static_cast<double>(p.batch) * (e * (double(p.m) * p.k + double(p.k) * p.n) + c * double(p.m) * p.n) + 2 * kOperandAlignment;
  }
  if (const auto* c = std::get_if<CopyOp>(&op.payload)) return c->bytes;
  if (const auto* c = std::get_if<CollectiveOp>(&op.payload)) return c->buffer_bytes * (1.0 + 1.0 / dag.process_group_of(c->group).size());
  if (const auto* e = std::get_if<ElementwiseOp>(&op.payload)) return e->bytes_read + 256 + e->bytes_written;
  if (const auto* r = std::get_if<ReduceOp>(&op.payload)) return (r->inputs + 1) * r->out_bytes + 256;
  if (const auto* s = std::get_if<SendRecvOp>(&op.payload)) {
    double sum = 0;
    for (const auto& t : s->sends) sum += t.bytes;
    return 2 * (sum + s->self_bytes) + 256;  // as much again for what it receives (ring steps are symmetric)
  }
  return 0;
}

void check_supported(const Dag& dag, const std::map<OpId, double>& stand_in_us) {
  for (OpId id = 0; id < dag.size(); ++id) {
    const Op& op = dag.op(id);
    if (!gpu_runs(op) && !stand_in_us.count(id))
      throw GpuError(fmt::format("op \"{}\" ({}) is not run by the CUDA backend and has no stand-in", op.name, op_kind_name(op)));
  }
}

// The world's communicator, then one per other process group that runs NCCL calls,
// split from it as torch.distributed.new_group does (ncclCommSplit: members share
// a color and are ordered by their ring position, the others pass NCCL_SPLIT_NOCOLOR).
// One thread drives every GPU here, so each split is one group call over all ranks.
void set_up_communicators(const LaunchPlan& plan, std::vector<std::unique_ptr<RankState>>& ranks) {
  const int n = static_cast<int>(ranks.size());
  std::vector<ncclComm_t> world(static_cast<std::size_t>(n));
  TPSIM_GPU_CHECK(ncclCommInitAll(world.data(), n, nullptr));
  for (int r = 0; r < n; ++r) ranks[static_cast<std::size_t>(r)]->comms[0] = world[static_cast<std::size_t>(r)];
  for (std::size_t pg = 1; pg < plan.process_groups.size(); ++pg) {
    if (!plan.uses_nccl[pg]) continue;
    std::vector<ncclComm_t> split(static_cast<std::size_t>(n), nullptr);
    TPSIM_GPU_CHECK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      const int at = plan.process_groups[pg].index_of(r);
      TPSIM_GPU_CHECK(ncclCommSplit(world[static_cast<std::size_t>(r)], at < 0 ? NCCL_SPLIT_NOCOLOR : 0, std::max(at, 0),
                                    &split[static_cast<std::size_t>(r)], nullptr));
    }
    TPSIM_GPU_CHECK(ncclGroupEnd());
    for (int r = 0; r < n; ++r) ranks[static_cast<std::size_t>(r)]->comms[pg] = split[static_cast<std::size_t>(r)];
  }
}

}  // namespace

bool run_in_cluster(cublasLtHandle_t lt, LtGemm& g, GemmProblem::Cluster cluster) {
  // The header's enumerator of that shape (a cluster spans C's rows x columns x 1).
  const std::string wanted = fmt::format("{}x{}x1", cluster.m, cluster.n);
  const LtName* shape = nullptr;
  for (const LtName& n : kLtNames)
    if (n.kind == LtEnum::CLUSTER_SHAPE && wanted == n.name) shape = &n;
  if (!shape) return false;
  cublasLtMatmulAlgo_t algo = g.algo;
  const auto id = static_cast<std::uint16_t>(shape->value);
  TPSIM_GPU_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &id, sizeof id));
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(lt, g.desc, g.a, g.b, g.c, g.c, &algo, &check) != CUBLAS_STATUS_SUCCESS) return false;
  if (check.workspaceSize > kWorkspaceBytes) return false;
  g.algo = algo;
  return true;
}

LtGemm plan_gemm(cublasLtHandle_t lt, const GemmProblem& p) {
  const LtTypes t = lt_types(p.dtype);
  const auto m = static_cast<std::uint64_t>(p.m), n = static_cast<std::uint64_t>(p.n), k = static_cast<std::uint64_t>(p.k);
  LtGemm g;
  cublasLtMatmulPreference_t pref = nullptr;
  try {
    TPSIM_GPU_CHECK(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = t.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    TPSIM_GPU_CHECK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    if (p.dtype == Dtype::fp8) {
      // torch._scaled_mm's use_fast_accum (torchao's forward GEMMs). Rowwise scales are not
      // lowered: no scenario the backend runs has them (only a training step's layers do).
      const std::int8_t fast = p.scaled_mm.fast_accumulation ? 1 : 0;
      TPSIM_GPU_CHECK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    // Column-major: A is m x k (stored k x m when transposed), B is k x n, C = D is m x n.
    TPSIM_GPU_CHECK(cublasLtMatrixLayoutCreate(&g.a, t.ab, t.transpose_a ? k : m, t.transpose_a ? m : k,
                                               static_cast<int64_t>(t.transpose_a ? k : m)));
    TPSIM_GPU_CHECK(cublasLtMatrixLayoutCreate(&g.b, t.ab, k, n, static_cast<int64_t>(k)));
    TPSIM_GPU_CHECK(cublasLtMatrixLayoutCreate(&g.c, t.cd, m, n, static_cast<int64_t>(m)));
    if (p.batch > 1) {  // strided batch: the products lie one after another, each operand packed
      const auto count = static_cast<std::int32_t>(p.batch);
      const std::pair<cublasLtMatrixLayout_t, std::int64_t> layouts[] = {
          {g.a, static_cast<std::int64_t>(m * k)}, {g.b, static_cast<std::int64_t>(k * n)}, {g.c, static_cast<std::int64_t>(m * n)}};
      for (auto [layout, stride] : layouts) {
        TPSIM_GPU_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
        TPSIM_GPU_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
      }
    }
    TPSIM_GPU_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = kWorkspaceBytes;
    TPSIM_GPU_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    // The heuristic's algorithms in its order; the first is what cuBLAS runs.
    std::vector<cublasLtMatmulHeuristicResult_t> results(GemmProblem::kHeuristicAlgorithms);
    int found = 0;
    TPSIM_GPU_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.a, g.b, g.c, g.c, pref, static_cast<int>(results.size()),
                                                   results.data(), &found));
    cublasLtMatmulPreferenceDestroy(pref);
    pref = nullptr;
    if (found == 0)
      throw GpuError(fmt::format("cuBLASLt has no algorithm for {}x{}x{} {}", p.m, p.n, p.k, dtype_name(p.dtype)));
    if (found <= p.heuristic_rank)
      throw GpuError(fmt::format("cuBLASLt's heuristic offers {} algorithm(s) for {}x{}x{} {}, none of rank {}", found, p.m, p.n,
                                 p.k, dtype_name(p.dtype), p.heuristic_rank));
    g.algo = results[static_cast<std::size_t>(p.heuristic_rank)].algo;
    g.offered = found;
    if (p.cluster.given() && !run_in_cluster(lt, g, p.cluster))
      throw GpuError(fmt::format("cuBLASLt's algorithm {} for {}x{}x{} {} does not run in clusters of {}x{}", p.heuristic_rank, p.m,
                                 p.n, p.k, dtype_name(p.dtype), p.cluster.m, p.cluster.n));
  } catch (...) {
    // Whatever was created before the failure is released: a caller that goes on
    // (microbench's next shape) leaks nothing.
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    destroy_gemm(g);
    throw;
  }
  const auto batch = static_cast<std::uint64_t>(p.batch);
  g.a_bytes = batch * m * k * type_bytes(t.ab);
  g.b_bytes = batch * k * n * type_bytes(t.ab);
  g.c_bytes = batch * m * n * type_bytes(t.cd);
  return g;
}

void destroy_gemm(LtGemm& g) {
  for (cublasLtMatrixLayout_t layout : {g.a, g.b, g.c})
    if (layout) cublasLtMatrixLayoutDestroy(layout);
  if (g.desc) cublasLtMatmulDescDestroy(g.desc);
  g = LtGemm{};
}

std::vector<std::unique_ptr<RankState>> set_up_ranks(const Dag& dag, const LaunchPlan& plan,
                                                     const std::map<OpId, double>& stand_in_us) {
  check_supported(dag, stand_in_us);
  const int n = dag.ranks();
  const int have = cuda_device_count();
  if (have < n) throw GpuError(fmt::format("the DAG needs {} GPUs, this machine has {}", n, have));
  double arena = 1 << 20;
  if (n > gpu::kMaxBarrierRanks)
    throw GpuError(fmt::format("the DAG has {} ranks: the backend's barrier takes at most {}", n, gpu::kMaxBarrierRanks));
  const int groups = static_cast<int>(plan.process_groups.size());
  const auto flag_count = static_cast<std::size_t>(groups) * static_cast<std::size_t>(n);
  std::vector<gpu::BarrierMembers> members(static_cast<std::size_t>(groups));
  for (int pg = 0; pg < groups; ++pg) {
    auto& m = members[static_cast<std::size_t>(pg)];
    m.count = plan.process_groups[static_cast<std::size_t>(pg)].size();
    for (int i = 0; i < m.count; ++i) m.ranks[i] = plan.process_groups[static_cast<std::size_t>(pg)].rank(i);
  }
  for (OpId id = 0; id < dag.size(); ++id) arena = std::max(arena, launch_bytes(dag.op(id), dag));
  const auto arena_bytes = static_cast<std::size_t>(arena) + 4096;

  std::vector<std::unique_ptr<RankState>> ranks;
  for (int r = 0; r < n; ++r) {
    auto st = std::make_unique<RankState>();
    st->device = r;
    st->stand_in_us = stand_in_us;
    TPSIM_GPU_CHECK(cudaSetDevice(r));
    for (int p = 0; p < n; ++p) {
      int can = 0;
      if (p == r) continue;
      TPSIM_GPU_CHECK(cudaDeviceCanAccessPeer(&can, r, p));
      if (!can) throw GpuError(fmt::format("GPU {} cannot access GPU {} as a peer", r, p));
      const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else TPSIM_GPU_CHECK(e);
    }
    TPSIM_GPU_CHECK(cudaDeviceGetAttribute(&st->sms, cudaDevAttrMultiProcessorCount, r));
    const RankPlan& rp = plan.ranks[static_cast<std::size_t>(r)];
    st->streams.resize(static_cast<std::size_t>(std::max(1, rp.streams)));
    for (auto& s : st->streams) TPSIM_GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    st->slots.resize(static_cast<std::size_t>(rp.events));
    for (auto& e : st->slots) TPSIM_GPU_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    st->op_start.resize(rp.launches.size());
    st->op_end.resize(rp.launches.size());
    for (auto& e : st->op_start) TPSIM_GPU_CHECK(cudaEventCreate(&e));
    for (auto& e : st->op_end) TPSIM_GPU_CHECK(cudaEventCreate(&e));
    TPSIM_GPU_CHECK(cudaEventCreate(&st->t0));
    std::size_t free_bytes = 0, total = 0;
    TPSIM_GPU_CHECK(cudaMemGetInfo(&free_bytes, &total));
    if (arena_bytes + st->streams.size() * kWorkspaceBytes > free_bytes)
      throw GpuError(fmt::format("GPU {}: the ops need {:.1f} GiB of operands, {:.1f} GiB is free", r, arena_bytes / 1073741824.0,
                                 free_bytes / 1073741824.0));
    TPSIM_GPU_CHECK(cudaMalloc(&st->arena, arena_bytes));
    TPSIM_GPU_CHECK(fill_operands(st->arena, arena_bytes, 0x9e3779b9u + static_cast<unsigned>(r), st->streams[0]));
    st->workspaces.resize(st->streams.size());
    for (auto& w : st->workspaces) TPSIM_GPU_CHECK(cudaMalloc(&w, kWorkspaceBytes));
    TPSIM_GPU_CHECK(cublasLtCreate(&st->lt));
    for (const Launch& l : rp.launches)
      if (l.kind == LaunchKind::gemm) st->gemms.emplace(l.op, plan_gemm(st->lt, std::get<GemmOp>(dag.op(l.op).payload).problem));
    TPSIM_GPU_CHECK(cudaMalloc(&st->flags, sizeof(int) * flag_count));
    TPSIM_GPU_CHECK(cudaMemset(st->flags, 0, sizeof(int) * flag_count));
    st->epochs.assign(static_cast<std::size_t>(groups), 0);
    st->members = members;
    st->comms.assign(static_cast<std::size_t>(groups), nullptr);
    ranks.push_back(std::move(st));
  }
  std::vector<int*> all_flags;
  for (const auto& st : ranks) all_flags.push_back(st->flags);
  for (auto& st : ranks) {
    TPSIM_GPU_CHECK(cudaSetDevice(st->device));
    TPSIM_GPU_CHECK(cudaMalloc(&st->flags_of_rank, sizeof(int*) * all_flags.size()));
    TPSIM_GPU_CHECK(cudaMemcpy(st->flags_of_rank, all_flags.data(), sizeof(int*) * all_flags.size(), cudaMemcpyHostToDevice));
    TPSIM_GPU_CHECK(cudaDeviceSynchronize());
  }
  if (n > 1) set_up_communicators(plan, ranks);
  return ranks;
}

void tear_down_ranks(std::vector<std::unique_ptr<RankState>>& ranks) {
  for (auto& st : ranks) {
    cudaSetDevice(st->device);
    cudaDeviceSynchronize();
    for (auto it = st->comms.rbegin(); it != st->comms.rend(); ++it)  // the splits before the world's
      if (*it) ncclCommDestroy(*it);
    for (auto& [id, g] : st->gemms) destroy_gemm(g);
    if (st->lt) cublasLtDestroy(st->lt);
    for (void* w : st->workspaces) cudaFree(w);
    cudaFree(st->arena);
    cudaFree(st->flags);
    cudaFree(st->flags_of_rank);
    for (auto* list : {&st->slots, &st->op_start, &st->op_end})
      for (cudaEvent_t e : *list) cudaEventDestroy(e);
    if (st->t0) cudaEventDestroy(st->t0);
    for (cudaStream_t s : st->streams) cudaStreamDestroy(s);
  }
  ranks.clear();
}

}  // namespace tpsim::gpu

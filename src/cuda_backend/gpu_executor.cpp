#include "tpsim/cuda/gpu_executor.hpp"

#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "gpu_kernels.hpp"
#include "gpu_setup.hpp"
#include "tpsim/core/median.hpp"

namespace tpsim {

namespace {

using gpu::RankState;

// Load every kernel module when CUDA starts, not at a kernel's first launch: a lazy
// load waits for the device's queue to drain, and in one process driving several
// GPUs that queue can hold a barrier or NCCL kernel spinning on a peer whose host
// thread is itself blocked in a load (CUDA's documented lazy-loading deadlock).
// Set before main, so before any CUDA call; a value the user set is kept.
const bool kEagerModules = [] { return setenv("CUDA_MODULE_LOADING", "EAGER", 0) == 0; }();

// A repeat that makes no progress for this long is a hang (a peer never reached a
// collective or barrier): report it rather than wait forever.
constexpr auto kStallLimit = std::chrono::seconds(120);

ncclDataType_t nccl_type() { return ncclBfloat16; }  // collectives move bf16 elements (the byte counts are what matter)

// A flag barrier among the members of process group `pg`, in that group's slots.
cudaError_t barrier(RankState& st, int pg, int ranks, cudaStream_t s) {
  const auto i = static_cast<std::size_t>(pg);
  return gpu::flag_barrier(st.flags_of_rank, st.device, st.members[i], pg * ranks, ++st.epochs[i], s);
}

// Enqueues one launch on its CUDA stream, exactly as the plan says.
void issue(const Launch& l, const Dag& dag, const LaunchPlan& plan, RankState& st, std::vector<std::unique_ptr<RankState>>& all) {
  cudaStream_t s = st.streams[static_cast<std::size_t>(l.stream)];
  const Op& op = dag.op(l.op);
  switch (l.kind) {
    case LaunchKind::gemm: {
      const gpu::LtGemm& g = st.gemms.at(l.op);
      const float alpha = 1.0f, beta = 0.0f;
      char* a = st.arena;
      char* b = a + gpu::aligned(g.a_bytes);
      char* c = b + gpu::aligned(g.b_bytes);
      TPSIM_GPU_CHECK(cublasLtMatmul(st.lt, g.desc, &alpha, a, g.a, b, g.b, &beta, c, g.c, c, g.c, &g.algo,
                                     st.workspaces[static_cast<std::size_t>(l.stream)], gpu::kWorkspaceBytes, s));
      return;
    }
    case LaunchKind::elementwise: {
      const auto& e = std::get<ElementwiseOp>(op.payload);
      const auto read = static_cast<std::size_t>(e.bytes_read);
      const std::size_t out = (read + 255) / 256 * 256;  // the kernel stores 16-byte vectors: keep them aligned
      TPSIM_GPU_CHECK(gpu::stream_bytes(st.arena, st.arena + out, read, static_cast<std::size_t>(e.bytes_written), 2 * st.sms, s));
      return;
    }
    case LaunchKind::reduction: {
      // The algorithm of PyTorch's Triton generation (one fp32 sum per element over the
      // stacked partials); ATen's instruction-bound torch.sum is not reproduced.
      const auto& r = std::get<ReduceOp>(op.payload);
      const auto in = static_cast<std::size_t>(r.inputs * r.out_bytes);
      const std::size_t out = (in + 255) / 256 * 256;
      TPSIM_GPU_CHECK(gpu::sum_partials(st.arena, st.arena + out, r.inputs, static_cast<std::size_t>(r.out_bytes) / 2, 2 * st.sms, s));
      return;
    }
    case LaunchKind::memcpy_peer: {
      const auto& c = std::get<CopyOp>(op.payload);
      RankState& src = *all[static_cast<std::size_t>(c.src_rank)];
      RankState& dst = *all[static_cast<std::size_t>(c.dst_rank)];
      TPSIM_GPU_CHECK(cudaMemcpyPeerAsync(dst.arena, dst.device, src.arena, src.device, static_cast<std::size_t>(c.bytes), s));
      return;
    }
    case LaunchKind::nccl_collective: {
      const auto& c = std::get<CollectiveOp>(op.payload);
      const auto elements = static_cast<std::size_t>(c.buffer_bytes / 2);
      const auto members = static_cast<std::size_t>(plan.process_groups[static_cast<std::size_t>(l.process_group)].size());
      const std::size_t shard = elements / members;
      ncclComm_t comm = st.comms[static_cast<std::size_t>(l.process_group)];
      char* whole = st.arena;
      char* part = st.arena + elements * 2;
      if (c.kind == CollectiveKind::all_gather)
        TPSIM_GPU_CHECK(ncclAllGather(part, whole, shard, nccl_type(), comm, s));
      else if (c.kind == CollectiveKind::reduce_scatter)
        TPSIM_GPU_CHECK(ncclReduceScatter(whole, part, shard, nccl_type(), ncclSum, comm, s));
      else
        TPSIM_GPU_CHECK(ncclAllReduce(whole, whole, elements, nccl_type(), ncclSum, comm, s));
      return;
    }
    case LaunchKind::nccl_sendrecv: {
      const auto& sr = std::get<SendRecvOp>(op.payload);
      ncclComm_t comm = st.comms[static_cast<std::size_t>(l.process_group)];
      // NCCL names peers by their rank in the communicator, the DAG by GPU.
      const auto peer = [&](int gpu) { return communicator_rank(plan, l.process_group, gpu); };
      std::size_t offset = 0;
      TPSIM_GPU_CHECK(ncclGroupStart());
      for (const Transfer& t : sr.sends) TPSIM_GPU_CHECK(ncclSend(st.arena, static_cast<std::size_t>(t.bytes), ncclChar, peer(t.peer), comm, s));
      for (const Transfer& t : l.recvs) {
        TPSIM_GPU_CHECK(ncclRecv(st.arena + offset, static_cast<std::size_t>(t.bytes), ncclChar, peer(t.peer), comm, s));
        offset += static_cast<std::size_t>(t.bytes);
      }
      if (sr.self_bytes > 0) {  // an all-to-all's own share, as NCCL's grouped call copies it
        const auto self = static_cast<std::size_t>(sr.self_bytes);
        TPSIM_GPU_CHECK(ncclSend(st.arena, self, ncclChar, peer(op.rank), comm, s));
        TPSIM_GPU_CHECK(ncclRecv(st.arena + offset + 256, self, ncclChar, peer(op.rank), comm, s));  // not in place: NCCL skips that
      }
      TPSIM_GPU_CHECK(ncclGroupEnd());
      return;
    }
    case LaunchKind::barrier:
      TPSIM_GPU_CHECK(barrier(st, l.process_group, static_cast<int>(all.size()), s));
      return;
    case LaunchKind::event_record:
      TPSIM_GPU_CHECK(cudaEventRecord(st.slots[static_cast<std::size_t>(l.event_slot)], s));
      return;
    case LaunchKind::event_wait:
      TPSIM_GPU_CHECK(cudaStreamWaitEvent(s, st.slots[static_cast<std::size_t>(l.event_slot)], 0));
      return;
    case LaunchKind::attention:
    case LaunchKind::fused_gemm:
      if (const auto it = st.stand_in_us.find(l.op); it != st.stand_in_us.end()) {
        TPSIM_GPU_CHECK(gpu::hold_sms(std::llround(it->second * 1e3), st.sms, s));
        return;
      }
      break;
  }
  throw GpuError(fmt::format("op \"{}\" is not run by the CUDA backend", op.name));
}

// One repeat on one rank: a cross-GPU barrier, a hold, the common start event, every launch
// bracketed by timed events; then the times since the start. The hold (one SM spinning for
// twice what the host took to issue the last repeat) keeps the GPU behind the host, so each
// launch is queued before the GPU reaches it and a span times the GPU, not the host's issue
// of the op (cuBLASLt's or NCCL's host work would otherwise sit between the start event and
// the kernel). The first warm-up repeat, with no estimate yet, runs without one.
void run_repeat(const RankPlan& rp, const Dag& dag, const LaunchPlan& plan, RankState& st, std::vector<std::unique_ptr<RankState>>& all,
                std::vector<OpSample>* out) {
  cudaStream_t first = st.streams[0];
  if (all.size() > 1) TPSIM_GPU_CHECK(barrier(st, Dag::kWorld, static_cast<int>(all.size()), first));
  if (st.issue_ns > 0) TPSIM_GPU_CHECK(gpu::hold_sms(2 * st.issue_ns, 1, first));
  const auto issue_start = std::chrono::steady_clock::now();
  TPSIM_GPU_CHECK(cudaEventRecord(st.t0, first));
  for (std::size_t s = 1; s < st.streams.size(); ++s) TPSIM_GPU_CHECK(cudaStreamWaitEvent(st.streams[s], st.t0, 0));
  for (std::size_t i = 0; i < rp.launches.size(); ++i) {
    const Launch& l = rp.launches[i];
    cudaStream_t s = st.streams[static_cast<std::size_t>(l.stream)];
    TPSIM_GPU_CHECK(cudaEventRecord(st.op_start[i], s));
    issue(l, dag, plan, st, all);
    TPSIM_GPU_CHECK(cudaEventRecord(st.op_end[i], s));
  }
  st.issue_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - issue_start).count();
  TPSIM_GPU_CHECK(cudaDeviceSynchronize());
  if (!out) return;
  for (std::size_t i = 0; i < rp.launches.size(); ++i) {
    float a = 0, b = 0;
    TPSIM_GPU_CHECK(cudaEventElapsedTime(&a, st.t0, st.op_start[i]));
    TPSIM_GPU_CHECK(cudaEventElapsedTime(&b, st.t0, st.op_end[i]));
    (*out)[rp.launches[i].op] = OpSample{a, b};
  }
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return "";
  return p.name;
}

std::vector<int> cuda_sm_counts(int devices) {
  std::vector<int> out;
  for (int d = 0; d < devices; ++d) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d);
    out.push_back(sms);
  }
  return out;
}

double time_tiny_kernel_us(const GpuRunOptions& options) {
  if (cuda_device_count() < 1) throw GpuError("no CUDA device found");
  TPSIM_GPU_CHECK(cudaSetDevice(0));
  cudaStream_t s = nullptr;
  void* buffer = nullptr;
  TPSIM_GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  TPSIM_GPU_CHECK(cudaMalloc(&buffer, 4096));
  std::vector<double> us;
  for (int it = 0; it < options.warmup + options.repeats; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    TPSIM_GPU_CHECK(gpu::stream_bytes(buffer, static_cast<char*>(buffer) + 2048, 16, 16, 1, s));
    TPSIM_GPU_CHECK(cudaStreamSynchronize(s));
    const auto t1 = std::chrono::steady_clock::now();
    if (it >= options.warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  cudaFree(buffer);
  cudaStreamDestroy(s);
  return median(us);
}

std::vector<std::vector<OpSample>> run_on_gpus(const Dag& dag, const LaunchPlan& plan, const GpuRunOptions& options) {
  auto ranks = gpu::set_up_ranks(dag, plan, options.stand_in_us);
  const int n = dag.ranks();
  std::vector<std::vector<OpSample>> repeats(static_cast<std::size_t>(options.repeats), std::vector<OpSample>(dag.size()));
  std::barrier sync(n);
  std::atomic<long> progress{0};  // repeats finished, all ranks together
  std::atomic<int> running{n};
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        RankState& st = *ranks[static_cast<std::size_t>(r)];
        TPSIM_GPU_CHECK(cudaSetDevice(st.device));
        const RankPlan& rp = plan.ranks[static_cast<std::size_t>(r)];
        for (int it = 0; it < options.warmup + options.repeats; ++it) {
          sync.arrive_and_wait();  // every host thread starts the repeat together
          run_repeat(rp, dag, plan, st, ranks, it < options.warmup ? nullptr : &repeats[static_cast<std::size_t>(it - options.warmup)]);
          ++progress;
        }
      } catch (const std::exception& e) {
        // The other ranks may now wait forever inside NCCL or a barrier kernel: stop the process.
        std::fprintf(stderr, "tpsim: error: GPU %d: %s\n", r, e.what());
        std::_Exit(1);
      }
      --running;
    });
  }
  // Watchdog: the threads cannot be interrupted inside a CUDA call, so a hang ends the process.
  long seen = -1;
  auto last_change = std::chrono::steady_clock::now();
  while (running > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (const long p = progress; p != seen) seen = p, last_change = std::chrono::steady_clock::now();
    else if (std::chrono::steady_clock::now() - last_change > kStallLimit) {
      std::fprintf(stderr, "tpsim: error: the GPUs made no progress for %lld s (%ld of %d rank-repeats done): a collective or "
                   "barrier some rank never reached\n", static_cast<long long>(kStallLimit.count()), p,
                   n * (options.warmup + options.repeats));
      std::_Exit(1);
    }
  }
  for (auto& t : threads) t.join();
  gpu::tear_down_ranks(ranks);
  return repeats;
}

}  // namespace tpsim

#include "gpu_kernels.hpp"

#include <cstdint>

#include <cuda_bf16.h>

namespace tpsim::gpu {

namespace {

__global__ void fill_kernel(std::uint16_t* p, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    p[i] = static_cast<std::uint16_t>(0x3800u | (h & 0x3ffu) | ((h >> 10) & 1u) << 15);
  }
}

__global__ void stream_kernel(const uint4* src, uint4* dst, std::size_t n_read, std::size_t n_write) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  const std::size_t n = n_read > n_write ? n_read : n_write;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    if (i < n_read) {
      const uint4 v = src[i];
      acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
    }
    if (i < n_write) dst[i] = acc;
  }
}

__global__ void sum_partials_kernel(const __nv_bfloat16* partials, __nv_bfloat16* out, int inputs, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    float acc = 0.0f;
    for (int r = 0; r < inputs; ++r) acc += __bfloat162float(partials[static_cast<std::size_t>(r) * n + i]);
    out[i] = __float2bfloat16(acc);
  }
}

__global__ void barrier_kernel(int* const* flags_of_rank, int rank, BarrierMembers members, int slot_base, int epoch) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < members.count) {
    const int peer = members.ranks[i];
    __threadfence_system();  // this rank's earlier writes are visible before the signal
    volatile int* theirs = flags_of_rank[peer] + slot_base + rank;
    *theirs = epoch;
    volatile int* mine = flags_of_rank[rank] + slot_base + peer;
    while (*mine < epoch) {
    }
  }
  __syncthreads();
}

__global__ void hold_kernel(unsigned long long ns) {
  extern __shared__ unsigned char occupied[];
  (void)occupied;
  unsigned long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

}  // namespace

cudaError_t hold_sms(long long ns, int sms, cudaStream_t s) {
  int device = 0, shared = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e == cudaSuccess) e = cudaFuncSetAttribute(hold_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
  if (e != cudaSuccess) return e;
  hold_kernel<<<sms, 128, static_cast<std::size_t>(shared), s>>>(static_cast<unsigned long long>(ns > 0 ? ns : 0));
  return cudaGetLastError();
}

cudaError_t fill_operands(void* p, std::size_t bytes, unsigned seed, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<std::uint16_t*>(p), bytes / 2, seed);
  return cudaGetLastError();
}

cudaError_t stream_bytes(const void* src, void* dst, std::size_t read_bytes, std::size_t write_bytes, int blocks, cudaStream_t s) {
  stream_kernel<<<blocks, 512, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), read_bytes / sizeof(uint4),
                                       write_bytes / sizeof(uint4));
  return cudaGetLastError();
}

cudaError_t sum_partials(const void* partials, void* out, int inputs, std::size_t elements, int blocks, cudaStream_t s) {
  sum_partials_kernel<<<blocks, 512, 0, s>>>(static_cast<const __nv_bfloat16*>(partials), static_cast<__nv_bfloat16*>(out), inputs,
                                             elements);
  return cudaGetLastError();
}

cudaError_t flag_barrier(int* const* flags_of_rank, int rank, const BarrierMembers& members, int slot_base, int epoch, cudaStream_t s) {
  const int threads = members.count > 32 ? ((members.count + 31) / 32) * 32 : 32;
  barrier_kernel<<<1, threads, 0, s>>>(flags_of_rank, rank, members, slot_base, epoch);
  return cudaGetLastError();
}

}  // namespace tpsim::gpu

#pragma once
// tpsim's own kernels for the CUDA backend (gpu_kernels.cu), callable from host C++.
#include <cstddef>

#include <cuda_runtime.h>

namespace tpsim::gpu {

// Finite, normal 16-bit patterns (0.5..1 in fp16, small normals in bf16), so GEMMs
// run on data like real activations rather than zeros.
cudaError_t fill_operands(void* p, std::size_t bytes, unsigned seed, cudaStream_t s);
// A memory-bound kernel: reads `read_bytes` from src and writes `write_bytes` to dst.
cudaError_t stream_bytes(const void* src, void* dst, std::size_t read_bytes, std::size_t write_bytes, int blocks, cudaStream_t s);
// Sums `inputs` stacked bf16 partials of `elements` each into one bf16 output, in fp32.
cudaError_t sum_partials(const void* partials, void* out, int inputs, std::size_t elements, int blocks, cudaStream_t s);
// The members of one barrier's process group, passed by value to the kernel.
constexpr int kMaxBarrierRanks = 64;
struct BarrierMembers {
  int count = 0;
  int ranks[kMaxBarrierRanks] = {};
};

// Signals each member's flag slot `slot_base + rank` with `epoch` (peer-mapped writes),
// then waits until every member has signalled this rank's slots `slot_base + member`.
// Each process group has its own slots, so barriers of different groups never pair.
cudaError_t flag_barrier(int* const* flags_of_rank, int rank, const BarrierMembers& members, int slot_base, int epoch, cudaStream_t s);
// A stand-in for an op the backend cannot run: one block per SM, each asking for all the
// shared memory a block may have (so nothing else shares its SM, as with a flash-attention
// kernel), spinning on the GPU's global timer for `ns` from its own start.
cudaError_t hold_sms(long long ns, int sms, cudaStream_t s);

}  // namespace tpsim::gpu

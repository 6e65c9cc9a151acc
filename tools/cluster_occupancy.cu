// How many thread-block clusters of each size one GPU holds at once, when each CTA needs a whole
// SM (as a Hopper GEMM's CTA does: ~200 KB of shared memory): cudaOccupancyMaxActiveClusters for
// clusters of 1-16 CTAs. A cluster's CTAs must share one GPC, so a GPU whose GPCs hold unequal
// SM counts runs fewer CTAs in clusters of 4 or 8 than it has SMs.
//
//   nvcc -arch=sm_90 -o cluster_occupancy tools/cluster_occupancy.cu && ./cluster_occupancy
//
// Prints one JSON object: the device, its SM count, and per cluster size the clusters and CTAs
// resident at once. Exits 3 with one line where there is no GPU.
#include <cstdio>

#include <cuda_runtime.h>

__global__ void one_cta_per_sm(int* out) {
  extern __shared__ int smem[];
  smem[threadIdx.x] = threadIdx.x;
  if (out && threadIdx.x == 0) out[blockIdx.x] = smem[0];
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cluster_occupancy: no CUDA device\n");
    return 3;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return 1;
  const int smem = static_cast<int>(prop.sharedMemPerBlockOptin);  // a whole SM's: one CTA per SM
  if (cudaFuncSetAttribute(one_cta_per_sm, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess ||
      cudaFuncSetAttribute(one_cta_per_sm, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    std::fprintf(stderr, "cluster_occupancy: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"shared_memory_per_cta\": %d, \"clusters\": [", prop.name, prop.multiProcessorCount, smem);
  for (int size = 1; size <= 16; ++size) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(size * 64);
    config.blockDim = dim3(128);
    config.dynamicSmemBytes = smem;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = size;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    int clusters = 0;
    const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, one_cta_per_sm, &config);
    std::printf("%s{\"ctas\": %d, \"resident_clusters\": %d, \"resident_ctas\": %d%s}", size > 1 ? ", " : "", size,
                e == cudaSuccess ? clusters : 0, e == cudaSuccess ? clusters * size : 0,
                e == cudaSuccess ? "" : ", \"refused\": true");
    if (e != cudaSuccess) cudaGetLastError();
  }
  std::printf("]}\n");
  return 0;
}

// The GPU test runner: without a CUDA device it says so and exits 77, which
// ctest reports as skipped; with one it runs the Catch2 tests tagged [gpu].
#if TPSIM_CATCH_MAJOR < 3
#define CATCH_CONFIG_RUNNER
#endif
#include "support/catch.hpp"

#include <cstdio>

#include "tpsim/cuda/gpu_executor.hpp"

int main(int argc, char** argv) {
  if (tpsim::cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device on this machine; the GPU tests need one\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

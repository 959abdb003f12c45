// cudaFree from a static destructor or atexit handler, after the emulated CUDA runtime's
// own exit handler ran, answers cudaErrorCudartUnloading (as CUDA does at unload), which
// the cuda backend's raw_free relies on. The check runs at exit, after Catch2 reported,
// so a failure there ends the process with status 3.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace {

void* g_memory = nullptr;

void free_at_exit() {
  if (cudaFree(g_memory) != cudaErrorCudartUnloading) _exit(3);
}

TEST_CASE("cudaFree after the runtime's exit handler answers cudaErrorCudartUnloading",
          "[cudart]") {
  // Registered before the runtime's first use, so it runs after the runtime's handler.
  REQUIRE(std::atexit(free_at_exit) == 0);
  REQUIRE(cudaMalloc(&g_memory, 64) == cudaSuccess);
  REQUIRE(cudaFree(nullptr) == cudaSuccess);
}

}  // namespace

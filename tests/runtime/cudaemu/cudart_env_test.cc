// The emulated CUDA runtime reads its devices, memory and scheduler from the environment
// at first use (BUILD sets the variables for this test).
#include <cuda_runtime_api.h>
#include <cudaemu_runtime.h>

#include <catch2/catch.hpp>

namespace streamgrad {
namespace {

TEST_CASE("devices, memory and the scheduler come from the environment", "[cudart]") {
  const SimSchedulerOptions o = cudaemu::scheduler();
  CHECK(o.kind == SimSchedulerKind::kDeterministic);
  CHECK(o.policy == SimPolicy::kPct);
  CHECK(o.seed == 7);
  CHECK(o.pct_depth == 3);
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 3);
  size_t free_bytes = 0, total = 0;
  REQUIRE(cudaSetDevice(2) == cudaSuccess);
  REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  CHECK(total == 65536);
}

}  // namespace
}  // namespace streamgrad

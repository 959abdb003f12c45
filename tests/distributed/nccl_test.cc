// The nccl process group without a usable GPU: init_process_group("nccl") says why (a
// build without CUDA says it has no nccl). Its collectives run in nccl_gpu_test, a
// GPU-only target (tag gpu), which fails rather than skips where there is no GPU.
#include <catch2/catch.hpp>

#include <memory>

#include "distributed/process_group.h"
#include "distributed/store.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("without a usable GPU the nccl backend says why", "[nccl]") {
  // On a GPU machine this target has nothing to check; nccl_gpu_test runs there.
  if (device_count(DeviceType::kCuda) > 0) return;
  auto nccl_of_one = [] {
    return distributed::init_process_group(
        "nccl", 0, 1, std::make_shared<distributed::TCPStore>("127.0.0.1", 0, 1, true));
  };
  CHECK_THROWS_AS(nccl_of_one(), DistributedError);
  CHECK_THROWS_WITH(nccl_of_one(), Catch::Contains("nccl"));
}

}  // namespace
}  // namespace streamgrad

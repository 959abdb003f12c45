// A malformed scheduler setting makes the emulated CUDA runtime report no usable device,
// naming the variable, rather than throw from a C API call.
#include <cuda_runtime_api.h>
#include <cudaemu_runtime.h>

#include <string>

#include <catch2/catch.hpp>

namespace streamgrad {
namespace {

TEST_CASE("a malformed STREAMGRAD_SIM_SCHEDULER is reported by cudaGetDeviceCount",
          "[cudart]") {
  int count = -1;
  CHECK(cudaGetDeviceCount(&count) == cudaErrorInvalidValue);
  CHECK(count == 0);
  CHECK(cudaemu::last_error_detail().find("STREAMGRAD_SIM_SCHEDULER") != std::string::npos);
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 16) == cudaErrorInvalidValue);
}

}  // namespace
}  // namespace streamgrad

// require_cuda_device(): the first line of every test case in a GPU-only target. Such
// targets are tagged "gpu": .bazelrc leaves them out of `bazel test //...` (no GPU here
// and in CI), and they run where a cuda device exists: on a GPU (bench/gpu.sh) and on the
// interpreted CUDA device (`bazel test --config=cudaemu //...`). A case that finds no
// device fails, naming why, instead of returning early and passing without running.
//
// interpreted_cuda(): whether cuda:0 is the interpreted device.
//
// Thread-safety: test thread only. Failure: a Catch2 failure of the calling test case.
#ifndef STREAMGRAD_TESTS_GPU_REQUIRED_H_
#define STREAMGRAD_TESTS_GPU_REQUIRED_H_

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <string>

#include "runtime/runtime.h"

namespace streamgrad {
namespace testing {

// Whether cuda:0 is the interpreted CUDA device (runtime/cudaemu), where every thread of
// every block runs on the CPU: tests then keep shapes that only matter on a GPU small.
inline bool interpreted_cuda() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return std::string(prop.name).find("interpreted") != std::string::npos;
}

inline void require_cuda_device() {
  if (device_count(DeviceType::kCuda) > 0) return;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  FAIL("no usable cuda device (cudaGetDeviceCount: "
       << cudaGetErrorName(err)
       << "); this test is GPU-only (tag \"gpu\"): run it on a GPU (bench/gpu.sh) or on the "
          "interpreted CUDA device (bazel test --config=cudaemu)");
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_GPU_REQUIRED_H_

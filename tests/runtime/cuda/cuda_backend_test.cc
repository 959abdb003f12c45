// The cuda backend through the public API, where no GPU is needed: it links, counts
// devices (0 without a driver, and then refuses cuda devices cleanly) and reports CUDA
// errors as DeviceError. What needs a device is cuda_backend_gpu_test.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/cuda/cuda_facts.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("cuda backend is linked and counts devices without throwing", "[cuda]") {
  REQUIRE(find_backend(DeviceType::kCuda) != nullptr);
  int n = -1;
  REQUIRE_NOTHROW(n = device_count(DeviceType::kCuda));
  REQUIRE(n >= 0);
  REQUIRE(is_available(DeviceType::kCuda) == (n > 0));
  if (n > 0) return;
  // No GPU: cuda devices are refused with DeviceError, never a crash.
  REQUIRE(default_device().type() != DeviceType::kCuda);
  REQUIRE(try_device(DeviceType::kCuda, 0) == Device("cpu"));
  REQUIRE_THROWS_AS(Stream::default_for(Device("cuda:0")), DeviceError);
  REQUIRE_THROWS_AS(raw_cuda_stream(Stream::unchecked(Device("cuda:0"), 0)), DeviceError);
}

TEST_CASE("the driver's release is read from both kernel modules' version lines", "[cuda]") {
  CHECK(nvidia_driver_release("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  "
                              "Thu Feb 22 01:44:30 UTC 2024") == "550.54.14");
  // The open module, as an H200 machine printed it (tools/devices once showed "for").
  CHECK(nvidia_driver_release("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                              "580.159.04  Release Build  (dvs-builder@U22)  Thu Oct 9 "
                              "2025") == "580.159.04");
  CHECK(nvidia_driver_release("NVRM version: something else") == "unknown");
  CHECK(nvidia_driver_release("NVIDIA UNIX Open Kernel Module for x86_64") == "unknown");
}

TEST_CASE("raw_cuda_stream refuses streams of other device types", "[cuda]") {
  REQUIRE_THROWS_AS(raw_cuda_stream(Stream::default_for(Device("cpu"))), DeviceError);
}

TEST_CASE("check_cuda throws DeviceError naming the error and the operation", "[cuda]") {
  REQUIRE_NOTHROW(check_cuda(cudaSuccess, "nothing"));
  try {
    check_cuda(cudaErrorMemoryAllocation, "cudaMalloc on cuda:3");
    FAIL("check_cuda did not throw");
  } catch (const DeviceError& e) {
    const std::string message = e.what();
    CHECK(message.find("cudaErrorMemoryAllocation") != std::string::npos);
    CHECK(message.find("cudaMalloc on cuda:3") != std::string::npos);
    CHECK(message.find("empty_cache") != std::string::npos);
  }
}

}  // namespace
}  // namespace streamgrad

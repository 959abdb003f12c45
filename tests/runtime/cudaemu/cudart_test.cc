// The emulated CUDA runtime (//runtime/cudaemu:cudart): errors, devices, memory and copies.
// Streams, events and kernels are in cudart_stream_test.cc.
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/cudaemu/cudart_test_util.h"

namespace streamgrad {
namespace cudaemu_test {
namespace {

TEST_CASE("error names and strings", "[cudart]") {
  CHECK(std::string(cudaGetErrorName(cudaSuccess)) == "cudaSuccess");
  CHECK(std::string(cudaGetErrorName(cudaErrorIllegalAddress)) == "cudaErrorIllegalAddress");
  CHECK(std::string(cudaGetErrorName(cudaErrorPeerAccessAlreadyEnabled)) ==
        "cudaErrorPeerAccessAlreadyEnabled");
  CHECK(std::string(cudaGetErrorString(cudaErrorMemoryAllocation)).find("memory") !=
        std::string::npos);
  CHECK(std::string(cudaGetErrorName(static_cast<cudaError_t>(12345))) == "cudaErrorUnknown");
}

TEST_CASE("the last error: peek keeps it, get returns and clears it", "[cudart]") {
  Fresh fresh;
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaSetDevice(99) == cudaErrorInvalidDevice);
  CHECK(cudaPeekAtLastError() == cudaErrorInvalidDevice);
  CHECK(cudaPeekAtLastError() == cudaErrorInvalidDevice);
  CHECK(cudaemu::last_error_detail().find("99") != std::string::npos);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  // A successful call leaves an earlier error in place.
  CHECK(cudaFree(reinterpret_cast<void*>(0x1234)) == cudaErrorInvalidValue);
  int device = -1;
  CUDA_OK(cudaGetDevice(&device));
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);

  cudaemu::set_last_error(cudaErrorLaunchFailure, "from a launch helper");
  CHECK(cudaPeekAtLastError() == cudaErrorLaunchFailure);
  CHECK(cudaemu::last_error_detail() == "from a launch helper");
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaemu::last_error_detail() == "from a launch helper");  // kept for the message
}

TEST_CASE("the last error is per host thread", "[cudart]") {
  Fresh fresh;
  CHECK(cudaSetDevice(-1) == cudaErrorInvalidDevice);
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] { other = cudaPeekAtLastError(); }).join();
  CHECK(other == cudaSuccess);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
}

TEST_CASE("devices: count, current device per thread, properties", "[cudart]") {
  Fresh fresh;
  int count = 0;
  CUDA_OK(cudaGetDeviceCount(&count));
  CHECK(count == 2);
  int device = -1;
  CUDA_OK(cudaGetDevice(&device));
  CHECK(device == 0);
  CUDA_OK(cudaSetDevice(1));
  int seen_by_other = -1;
  std::thread([&] { cudaGetDevice(&seen_by_other); }).join();
  CHECK(seen_by_other == 0);
  CUDA_OK(cudaGetDevice(&device));
  CHECK(device == 1);
  CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice);

  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 1));
  CHECK(std::string(prop.name) == "streamgrad interpreted CUDA device");
  CHECK(prop.major == 9);
  CHECK(prop.warpSize == 32);
  CHECK(prop.maxThreadsPerBlock == 1024);
  CHECK(prop.sharedMemPerBlock == 48 * 1024);
  CHECK(prop.totalGlobalMem == (size_t{4} << 30));
  CHECK(prop.multiProcessorCount > 0);
  CHECK(cudaGetDeviceProperties(&prop, 2) == cudaErrorInvalidDevice);

  char bus[32];
  CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 1));
  CHECK(std::string(bus) == "0000:02:00.0");
  CHECK(cudaDeviceGetPCIBusId(bus, 4, 1) == cudaErrorInvalidValue);
  int runtime = 0, driver = 0;
  CUDA_OK(cudaRuntimeGetVersion(&runtime));
  CUDA_OK(cudaDriverGetVersion(&driver));
  CHECK(runtime >= 12000);
  CHECK(driver >= runtime);
  int least = 1, greatest = 1;
  CUDA_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK(least == 0);
  CHECK(greatest < least);
}

TEST_CASE("devices and memory size come from the environment", "[cudart]") {
  Fresh fresh;
  int count = 0;
  {
    EnvScope three("STREAMGRAD_CUDAEMU_DEVICES", "3");
    CUDA_OK(cudaGetDeviceCount(&count));
    CHECK(count == 3);
  }
  {
    EnvScope none("STREAMGRAD_CUDAEMU_DEVICES", "0");
    CHECK(cudaGetDeviceCount(&count) == cudaErrorNoDevice);
    CHECK(count == 0);
    void* p = nullptr;
    CHECK(cudaMalloc(&p, 16) == cudaErrorNoDevice);
  }
  {
    EnvScope bad("STREAMGRAD_CUDAEMU_DEVICES", "two");
    CHECK(cudaGetDeviceCount(&count) == cudaErrorInvalidValue);
    CHECK(cudaemu::last_error_detail().find("STREAMGRAD_CUDAEMU_DEVICES") != std::string::npos);
  }
  {
    EnvScope small("STREAMGRAD_CUDAEMU_MEMORY_BYTES", "1048576");
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    CHECK(prop.totalGlobalMem == 1048576);
  }
  CUDA_OK(cudaGetDeviceCount(&count));
  CHECK(count == 2);
}

TEST_CASE("peer access", "[cudart]") {
  Fresh fresh;
  int can = -1;
  CUDA_OK(cudaDeviceCanAccessPeer(&can, 0, 1));
  CHECK(can == 1);
  CUDA_OK(cudaDeviceCanAccessPeer(&can, 1, 1));
  CHECK(can == 0);
  CHECK(cudaDeviceCanAccessPeer(&can, 0, 5) == cudaErrorInvalidDevice);
  CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
  CHECK(cudaDeviceEnablePeerAccess(1, 0) == cudaErrorPeerAccessAlreadyEnabled);
  CHECK(cudaGetLastError() == cudaErrorPeerAccessAlreadyEnabled);
  CHECK(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorInvalidDevice);  // itself
  CHECK(cudaDeviceEnablePeerAccess(7, 0) == cudaErrorInvalidDevice);
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaDeviceEnablePeerAccess(0, 0));  // each direction on its own
}

TEST_CASE("cudaMalloc accounts against the device's memory", "[cudart]") {
  Fresh fresh;
  EnvScope small("STREAMGRAD_CUDAEMU_MEMORY_BYTES", "1048576");
  size_t free_bytes = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
  CHECK(total == 1048576);
  CHECK(free_bytes == total);
  void* a = nullptr;
  void* b = nullptr;
  CUDA_OK(cudaMalloc(&a, 600 * 1024));
  CHECK(reinterpret_cast<uintptr_t>(a) % 256 == 0);
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
  CHECK(free_bytes == total - 600 * 1024);
  CHECK(cudaMalloc(&b, 600 * 1024) == cudaErrorMemoryAllocation);
  CHECK(b == nullptr);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaSuccess);  // not sticky
  // Each device has its own memory.
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaMalloc(&b, 600 * 1024));
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaMalloc(&b, 600 * 1024));
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaMalloc(&a, 0));
  CHECK(a == nullptr);
  CUDA_OK(cudaFree(nullptr));
}

TEST_CASE("cudaFree of memory it did not hand out", "[cudart]") {
  Fresh fresh;
  int local = 0;
  CHECK(cudaFree(&local) == cudaErrorInvalidValue);
  char* p = nullptr;
  CUDA_OK(cudaMalloc(&p, 64));
  CHECK(cudaFree(p + 8) == cudaErrorInvalidValue);
  CHECK(cudaFreeHost(p) == cudaErrorInvalidValue);
  CUDA_OK(cudaFree(p));
  CHECK(cudaFree(p) == cudaErrorInvalidValue);
}

TEST_CASE("host memory and pointer attributes", "[cudart]") {
  Fresh fresh;
  void* pinned = nullptr;
  CUDA_OK(cudaHostAlloc(&pinned, 100, cudaHostAllocPortable));
  void* plain = nullptr;
  CUDA_OK(cudaMallocHost(&plain, 10));
  CHECK(cudaHostAlloc(&pinned, 10, 0x80) == cudaErrorInvalidValue);
  CUDA_OK(cudaSetDevice(1));
  char* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, 1000));
  cudaPointerAttributes a;
  CUDA_OK(cudaPointerGetAttributes(&a, dev + 999));  // inside the allocation
  CHECK(a.type == cudaMemoryTypeDevice);
  CHECK(a.device == 1);
  CUDA_OK(cudaPointerGetAttributes(&a, pinned));
  CHECK(a.type == cudaMemoryTypeHost);
  CHECK(a.device == 0);
  CHECK(a.hostPointer == pinned);
  int local = 0;
  CUDA_OK(cudaPointerGetAttributes(&a, &local));
  CHECK(a.type == cudaMemoryTypeUnregistered);
  CHECK(cudaFree(pinned) == cudaErrorInvalidValue);
  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaFreeHost(plain));
  CHECK(cudaFreeHost(plain) == cudaErrorInvalidValue);
  CUDA_OK(cudaFree(dev));
}

TEST_CASE("copies and fills: results, kinds and ranges", "[cudart]") {
  Fresh fresh;
  std::vector<int> host = {1, 2, 3, 4}, back(4, 0);
  int* a = nullptr;
  int* b = nullptr;
  CUDA_OK(cudaMalloc(&a, 4 * sizeof(int)));
  CUDA_OK(cudaMalloc(&b, 4 * sizeof(int)));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaMemcpyAsync(a, host.data(), 16, cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaMemcpyAsync(b, a, 16, cudaMemcpyDefault, s));
  CUDA_OK(cudaMemsetAsync(a, 0x01, 8, s));
  CUDA_OK(cudaMemcpyAsync(back.data(), b, 16, cudaMemcpyDeviceToHost, s));
  CHECK(back[0] == 0);  // nothing ran yet: the deterministic scheduler waits for the host
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK(back == host);
  CUDA_OK(cudaMemcpy(back.data(), a, 16, cudaMemcpyDefault));
  CHECK(back == std::vector<int>{0x01010101, 0x01010101, 3, 4});

  CHECK(cudaMemcpyAsync(a, host.data(), 16, cudaMemcpyDeviceToHost, s) == cudaErrorInvalidValue);
  CHECK(cudaMemcpyAsync(a, host.data(), 16, static_cast<cudaMemcpyKind>(9), s) ==
        cudaErrorInvalidMemcpyDirection);
  CHECK(cudaMemcpyAsync(a + 1, host.data(), 16, cudaMemcpyDefault, s) == cudaErrorInvalidValue);
  CHECK(cudaemu::last_error_detail().find("past the end") != std::string::npos);
  CHECK(cudaMemsetAsync(host.data(), 0, 4, s) == cudaErrorInvalidValue);
  CHECK(cudaMemsetAsync(a, 0, 17, s) == cudaErrorInvalidValue);
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
}

}  // namespace
}  // namespace cudaemu_test
}  // namespace streamgrad

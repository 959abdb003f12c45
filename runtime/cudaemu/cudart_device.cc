// The emulated CUDA runtime's device API: count, current device, properties, versions,
// stream priorities, peer access and cudaDeviceSynchronize (cuda_runtime_api.h).
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/cudaemu/block_runner.h"
#include "runtime/cudaemu/cudart_state.h"

namespace {

using streamgrad::cudaemu::internal::fail;
using streamgrad::cudaemu::internal::Runtime;
namespace internal = streamgrad::cudaemu::internal;

constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;
constexpr int kVersion = CUDART_VERSION;

// Under rt.mu: the device's validity, set as the last error when it is not.
cudaError_t valid(Runtime& rt, int device) { return rt.check_device(device); }

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaGetDeviceCount", &err)) return err;
  if (count == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: count is null");
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  *count = 0;
  if (rt.init_error != cudaSuccess) return fail(rt.init_error, rt.init_detail);
  if (rt.device_count == 0) {
    return fail(cudaErrorNoDevice, "no emulated CUDA device (STREAMGRAD_CUDAEMU_DEVICES=0)");
  }
  *count = rt.device_count;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaSetDevice", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if ((err = valid(rt, device)) != cudaSuccess) return err;
  internal::current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDevice: device is null");
  *device = internal::current_device();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaGetDeviceProperties", &err)) return err;
  if (prop == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDeviceProperties: prop is null");
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if ((err = valid(rt, device)) != cudaSuccess) return err;
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "streamgrad interpreted CUDA device");
  prop->totalGlobalMem = rt.devices[device]->total;
  prop->sharedMemPerBlock = streamgrad::cudaemu::kDefaultSharedBytes;
  prop->sharedMemPerBlockOptin = streamgrad::cudaemu::kMaxOptInSharedBytes;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->memPitch = 2147483647;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->clockRate = 1755000;
  prop->totalConstMem = 65536;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->concurrentKernels = 1;
  prop->pciBusID = device + 1;
  prop->pciDeviceID = 0;
  prop->pciDomainID = 0;
  prop->asyncEngineCount = 2;
  prop->unifiedAddressing = 1;
  prop->memoryClockRate = 2619000;
  prop->memoryBusWidth = 5120;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->canMapHostMemory = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaDeviceGetPCIBusId", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if ((err = valid(rt, device)) != cudaSuccess) return err;
  char id[32];
  const int n = std::snprintf(id, sizeof(id), "0000:%02x:00.0", device + 1);
  if (pciBusId == nullptr || len <= n) {
    return fail(cudaErrorInvalidValue,
                absl::StrCat("cudaDeviceGetPCIBusId: the buffer needs ", n + 1, " bytes"));
  }
  std::memcpy(pciBusId, id, static_cast<size_t>(n) + 1);
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return fail(cudaErrorInvalidValue, "runtimeVersion is null");
  *runtimeVersion = kVersion;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return fail(cudaErrorInvalidValue, "driverVersion is null");
  *driverVersion = kVersion;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (leastPriority != nullptr) *leastPriority = kLeastPriority;
  if (greatestPriority != nullptr) *greatestPriority = kGreatestPriority;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaDeviceCanAccessPeer", &err)) return err;
  if (canAccessPeer == nullptr) return fail(cudaErrorInvalidValue, "canAccessPeer is null");
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if ((err = valid(rt, device)) != cudaSuccess || (err = valid(rt, peerDevice)) != cudaSuccess) {
    return err;
  }
  *canAccessPeer = device != peerDevice ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaDeviceEnablePeerAccess", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  const int device = internal::current_device();
  if ((err = valid(rt, device)) != cudaSuccess) return err;
  if ((err = internal::sticky_of(device)) != cudaSuccess) return err;
  if ((err = valid(rt, peerDevice)) != cudaSuccess) return err;
  if (flags != 0) {
    return fail(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess: flags must be 0");
  }
  if (peerDevice == device) {
    return fail(cudaErrorInvalidDevice, "cudaDeviceEnablePeerAccess: a device is not its own peer");
  }
  bool& enabled = rt.devices[device]->peer[peerDevice];
  if (enabled) {
    return fail(cudaErrorPeerAccessAlreadyEnabled,
                absl::StrCat("device ", device, " already accesses device ", peerDevice));
  }
  enabled = true;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaDeviceSynchronize", &err)) return err;
  Runtime& rt = Runtime::get();
  const int device = internal::current_device();
  {
    std::lock_guard<std::mutex> lk(rt.mu);
    if ((err = valid(rt, device)) != cudaSuccess) return err;
  }
  try {
    rt.exec().synchronize_device(device);
  } catch (const std::exception& e) {
    return fail(cudaErrorUnknown, absl::StrCat("cudaDeviceSynchronize: ", e.what()));
  }
  return internal::sticky_of(device);
}

}  // extern "C"

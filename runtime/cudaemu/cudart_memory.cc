// The emulated CUDA runtime's memory API: device memory (host memory accounted per device
// against its totalGlobalMem), page-locked host memory, pointer attributes, and copies and
// fills on streams (cuda_runtime_api.h; cudaemu_runtime.h lists where they differ from CUDA).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/cudaemu/cudart_state.h"

namespace {

using streamgrad::cudaemu::internal::Allocation;
using streamgrad::cudaemu::internal::fail;
using streamgrad::cudaemu::internal::kAllocAlignment;
using streamgrad::cudaemu::internal::Runtime;
namespace internal = streamgrad::cudaemu::internal;

size_t round_up(size_t n) { return (n + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment; }

// Under rt.mu: whether [p, p + n) is device memory; fails when it starts inside an
// allocation but runs past its end.
cudaError_t classify_range(Runtime& rt, const void* p, size_t n, const char* api,
                           const char* side, bool* is_device) {
  bool bad = false;
  uintptr_t base = 0;
  const Allocation* a = rt.find(p, n, &bad, &base);
  *is_device = a != nullptr && !a->host;
  if (bad) {
    return fail(cudaErrorInvalidValue,
                absl::StrCat(api, ": the ", side, " range of ", n, " bytes at offset ",
                             reinterpret_cast<uintptr_t>(p) - base, " runs past the end of its ",
                             a->bytes, "-byte allocation"));
  }
  return cudaSuccess;
}

// Under rt.mu: checks a copy's pointers against its kind.
cudaError_t check_copy(Runtime& rt, void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                       const char* api) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return fail(cudaErrorInvalidMemcpyDirection,
                absl::StrCat(api, ": ", static_cast<int>(kind), " is not a cudaMemcpyKind"));
  }
  if (count > 0 && (dst == nullptr || src == nullptr)) {
    return fail(cudaErrorInvalidValue, absl::StrCat(api, ": a null pointer"));
  }
  bool dst_device = false, src_device = false;
  cudaError_t err = classify_range(rt, dst, count, api, "destination", &dst_device);
  if (err == cudaSuccess) err = classify_range(rt, src, count, api, "source", &src_device);
  if (err != cudaSuccess || kind == cudaMemcpyDefault) return err;
  const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  if (want_src != src_device || want_dst != dst_device) {
    return fail(cudaErrorInvalidValue,
                absl::StrCat(api, ": the kind says the source is ", want_src ? "device" : "host",
                             " and the destination ", want_dst ? "device" : "host",
                             " memory, but they are ", src_device ? "device" : "host", " and ",
                             dst_device ? "device" : "host", " memory; cudaMemcpyDefault "
                             "lets the runtime tell"));
  }
  return cudaSuccess;
}

std::function<void()> copy_fn(void* dst, const void* src, size_t count) {
  return [=] { std::memmove(dst, src, count); };
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaMalloc", &err)) return err;
  if (devPtr == nullptr) return fail(cudaErrorInvalidValue, "cudaMalloc: devPtr is null");
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  const int device = internal::current_device();
  if ((err = rt.check_device(device)) != cudaSuccess) return err;
  if ((err = internal::sticky_of(device)) != cudaSuccess) return err;
  *devPtr = nullptr;
  if (size == 0) return cudaSuccess;
  auto& dev = *rt.devices[device];
  const size_t bytes = round_up(size);
  void* p = bytes < size || bytes > dev.total - dev.used
                ? nullptr
                : std::aligned_alloc(kAllocAlignment, bytes);
  if (p == nullptr) {
    return fail(cudaErrorMemoryAllocation,
                absl::StrCat("cudaMalloc: ", size, " bytes do not fit on emulated device ",
                             device, ": ", dev.total - dev.used, " of ", dev.total,
                             " bytes free (STREAMGRAD_CUDAEMU_MEMORY_BYTES sets the total)"));
  }
  dev.used += bytes;
  rt.allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{size, device, false};
  *devPtr = p;
  return cudaSuccess;
}

// Waits for the allocation's device first: CUDA's cudaFree synchronises, and here the
// memory is gone for real once freed.
cudaError_t cudaFree(void* devPtr) {
  if (devPtr == nullptr) return cudaSuccess;
  cudaError_t err;
  if (internal::refuse_in_task("cudaFree", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if (rt.unloading) return fail(cudaErrorCudartUnloading, "cudaFree during process exit");
  auto it = rt.allocations.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == rt.allocations.end() || it->second.host) {
    return fail(cudaErrorInvalidValue,
                "cudaFree: the pointer is not the start of a live cudaMalloc allocation");
  }
  const int device = it->second.device;
  if ((err = internal::sticky_of(device)) != cudaSuccess) return err;
  try {
    rt.exec().synchronize_device(device);
  } catch (const std::exception& e) {
    return fail(cudaErrorUnknown, absl::StrCat("cudaFree: ", e.what()));
  }
  rt.devices[device]->used -= round_up(it->second.bytes);
  rt.allocations.erase(it);
  std::free(devPtr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaMemGetInfo", &err)) return err;
  if (free == nullptr || total == nullptr) {
    return fail(cudaErrorInvalidValue, "cudaMemGetInfo: free or total is null");
  }
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  const int device = internal::current_device();
  if ((err = rt.check_device(device)) != cudaSuccess) return err;
  if ((err = internal::sticky_of(device)) != cudaSuccess) return err;
  *total = rt.devices[device]->total;
  *free = *total - rt.devices[device]->used;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaHostAlloc", &err)) return err;
  constexpr unsigned kKnown = cudaHostAllocPortable | cudaHostAllocMapped |
                              cudaHostAllocWriteCombined;
  if (pHost == nullptr || (flags & ~kKnown) != 0) {
    return fail(cudaErrorInvalidValue, "cudaHostAlloc: pHost is null or flags are unknown");
  }
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  *pHost = nullptr;
  if ((err = rt.check_device(internal::current_device())) != cudaSuccess) return err;
  if (size == 0) return cudaSuccess;
  void* p = round_up(size) < size ? nullptr : std::aligned_alloc(kAllocAlignment, round_up(size));
  if (p == nullptr) {
    return fail(cudaErrorMemoryAllocation,
                absl::StrCat("cudaHostAlloc: ", size, " bytes of host memory"));
  }
  rt.allocations[reinterpret_cast<uintptr_t>(p)] =
      Allocation{size, internal::current_device(), true};
  *pHost = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  cudaError_t err;
  if (internal::refuse_in_task("cudaFreeHost", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if (rt.unloading) return fail(cudaErrorCudartUnloading, "cudaFreeHost during process exit");
  auto it = rt.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == rt.allocations.end() || !it->second.host) {
    return fail(cudaErrorInvalidValue,
                "cudaFreeHost: the pointer is not the start of a live cudaHostAlloc allocation");
  }
  rt.exec().synchronize_all();  // queued copies may still read or write it
  rt.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaPointerGetAttributes", &err)) return err;
  if (attributes == nullptr) {
    return fail(cudaErrorInvalidValue, "cudaPointerGetAttributes: attributes is null");
  }
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  bool bad = false;
  uintptr_t base = 0;
  const Allocation* a = rt.find(ptr, 1, &bad, &base);
  void* p = const_cast<void*>(ptr);
  if (a == nullptr) {
    *attributes = {cudaMemoryTypeUnregistered, -2, nullptr, p};
  } else if (a->host) {
    *attributes = {cudaMemoryTypeHost, a->device, p, p};
  } else {
    *attributes = {cudaMemoryTypeDevice, a->device, p, nullptr};
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaMemcpyAsync", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  CUstream_st* s = nullptr;
  if ((err = rt.resolve(stream, &s)) != cudaSuccess) return err;
  if ((err = internal::sticky_of(s->device)) != cudaSuccess) return err;
  if ((err = check_copy(rt, dst, src, count, kind, "cudaMemcpyAsync")) != cudaSuccess) return err;
  if (count == 0) return cudaSuccess;
  return rt.enqueue(*s, "cudaMemcpyAsync", copy_fn(dst, src, count));
}

// On the current device's legacy stream, then waits for it: so it also waits for the
// device's blocking streams, and not for its non-blocking ones.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaMemcpy", &err)) return err;
  Runtime& rt = Runtime::get();
  std::shared_ptr<internal::Marker> done;
  CUstream_st* s = nullptr;
  {
    std::lock_guard<std::mutex> lk(rt.mu);
    if ((err = rt.resolve(nullptr, &s)) != cudaSuccess) return err;
    if ((err = internal::sticky_of(s->device)) != cudaSuccess) return err;
    if ((err = check_copy(rt, dst, src, count, kind, "cudaMemcpy")) != cudaSuccess) return err;
    if (count == 0) return cudaSuccess;
    if ((err = rt.enqueue(*s, "cudaMemcpy", copy_fn(dst, src, count))) != cudaSuccess) {
      return err;
    }
    done = rt.devices[s->device]->legacy_tail;
  }
  rt.exec().synchronize_marker(*done);
  return internal::sticky_of(s->device);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaMemsetAsync", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  CUstream_st* s = nullptr;
  if ((err = rt.resolve(stream, &s)) != cudaSuccess) return err;
  if ((err = internal::sticky_of(s->device)) != cudaSuccess) return err;
  if (count == 0) return cudaSuccess;
  bool is_device = false;
  if ((err = classify_range(rt, devPtr, count, "cudaMemsetAsync", "destination", &is_device)) !=
      cudaSuccess) {
    return err;
  }
  if (!is_device) {
    return fail(cudaErrorInvalidValue, "cudaMemsetAsync: the destination is not device memory");
  }
  const unsigned char byte = static_cast<unsigned char>(value);
  return rt.enqueue(*s, "cudaMemsetAsync", [=] { std::memset(devPtr, byte, count); });
}

}  // extern "C"

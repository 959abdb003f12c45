// The emulated CUDA driver's virtual memory management (include/cuda.h) and
// cudaGetDriverEntryPointByVersion, through which the project finds it. Reserved ranges
// are anonymous mappings without access; mapping a handle and granting access makes its
// pages readable and writable; unmapping hands them back at once.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <mutex>

#include "cuda.h"
#include "cuda_runtime_api.h"
#include "runtime/cudaemu/cudart_state.h"

namespace {

using streamgrad::cudaemu::internal::Allocation;
using streamgrad::cudaemu::internal::Runtime;
using streamgrad::cudaemu::internal::VmHandle;
using streamgrad::cudaemu::internal::VmMapping;
namespace internal = streamgrad::cudaemu::internal;

constexpr size_t kGranularity = size_t{2} << 20;

bool whole_pages(size_t bytes) { return bytes > 0 && bytes % kGranularity == 0; }

// Under rt.mu: the runtime's configuration error or a device out of range.
CUresult check_device(Runtime& rt, int device) {
  if (rt.init_error != cudaSuccess) return CUDA_ERROR_NOT_INITIALIZED;
  return device >= 0 && device < rt.device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult check_prop(Runtime& rt, const CUmemAllocationProp* prop) {
  if (prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return check_device(rt, prop->location.id);
}

// Under rt.mu: the reservation holding [at, at + bytes), or end().
std::map<uintptr_t, size_t>::iterator reservation_of(Runtime& rt, uintptr_t at, size_t bytes) {
  auto it = rt.reservations.upper_bound(at);
  if (it == rt.reservations.begin()) return rt.reservations.end();
  --it;
  const bool inside = at >= it->first && bytes <= it->second && at - it->first <= it->second - bytes;
  return inside ? it : rt.reservations.end();
}

// Under rt.mu: the mappings that tile [at, at + bytes) exactly, in order; false when the
// range starts or ends inside a mapping or has a hole.
bool whole_mappings(Runtime& rt, uintptr_t at, size_t bytes,
                    std::map<uintptr_t, VmMapping>::iterator* first,
                    std::map<uintptr_t, VmMapping>::iterator* last) {
  auto it = rt.mappings.find(at);
  if (it == rt.mappings.end() || bytes == 0) return false;
  *first = it;
  uintptr_t end = at;
  for (; it != rt.mappings.end() && it->first == end && end - at < bytes; ++it) {
    end += it->second.as_allocation.bytes;
  }
  *last = it;
  return end - at == bytes;
}

// Under rt.mu: forgets a handle's bytes once it is released and mapped nowhere.
void drop_if_done(Runtime& rt, std::map<unsigned long long, VmHandle>::iterator h) {
  if (!h->second.released || h->second.mappings > 0) return;
  rt.devices[h->second.device]->used -= h->second.bytes;
  rt.vm_handles.erase(h);
}

#define SG_VMM_LOCKED(rt)                                                  \
  if (internal::in_task()) return CUDA_ERROR_NOT_PERMITTED;                \
  Runtime& rt = Runtime::get();                                            \
  std::lock_guard<std::mutex> lock_(rt.mu)

}  // namespace

extern "C" {

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define SG_NAME(e) \
  case e:          \
    *pStr = #e;    \
    return CUDA_SUCCESS;
    SG_NAME(CUDA_SUCCESS)
    SG_NAME(CUDA_ERROR_INVALID_VALUE)
    SG_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    SG_NAME(CUDA_ERROR_NOT_INITIALIZED)
    SG_NAME(CUDA_ERROR_INVALID_DEVICE)
    SG_NAME(CUDA_ERROR_ALREADY_MAPPED)
    SG_NAME(CUDA_ERROR_NOT_MAPPED)
    SG_NAME(CUDA_ERROR_INVALID_HANDLE)
    SG_NAME(CUDA_ERROR_NOT_PERMITTED)
    SG_NAME(CUDA_ERROR_NOT_SUPPORTED)
    SG_NAME(CUDA_ERROR_UNKNOWN)
#undef SG_NAME
  }
  *pStr = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  SG_VMM_LOCKED(rt);
  const CUresult r = check_device(rt, ordinal);
  if (r == CUDA_SUCCESS) *device = ordinal;
  return r;
}

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  SG_VMM_LOCKED(rt);
  const CUresult r = check_device(rt, dev);
  if (r != CUDA_SUCCESS) return r;
  if (attrib != CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) {
    return CUDA_ERROR_INVALID_VALUE;  // not emulated
  }
  *pi = 1;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  if (granularity == nullptr || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                 option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  SG_VMM_LOCKED(rt);
  const CUresult r = check_prop(rt, prop);
  if (r == CUDA_SUCCESS) *granularity = kGranularity;
  return r;
}

// The hint `addr` is ignored (CUDA may ignore it too); alignment 0 means the granularity.
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  (void)addr;
  if (ptr == nullptr || !whole_pages(size) || flags != 0 ||
      (alignment != 0 && (alignment & (alignment - 1)) != 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  SG_VMM_LOCKED(rt);
  if (rt.init_error != cudaSuccess) return CUDA_ERROR_NOT_INITIALIZED;
  const size_t align = alignment > kGranularity ? alignment : kGranularity;
  if (size > SIZE_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
  void* raw = mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (lo + align - 1) / align * align;
  if (start > lo) munmap(raw, start - lo);
  if (align > start - lo) munmap(reinterpret_cast<void*>(start + size), align - (start - lo));
  rt.reservations[start] = size;
  *ptr = start;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SG_VMM_LOCKED(rt);
  auto it = rt.reservations.find(ptr);
  if (it == rt.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  auto m = rt.mappings.lower_bound(ptr);
  if (m != rt.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), size);
  rt.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  if (handle == nullptr || !whole_pages(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  SG_VMM_LOCKED(rt);
  const CUresult r = check_prop(rt, prop);
  if (r != CUDA_SUCCESS) return r;
  internal::DeviceState& dev = *rt.devices[prop->location.id];
  if (size > dev.total - dev.used) return CUDA_ERROR_OUT_OF_MEMORY;
  dev.used += size;
  const unsigned long long id = rt.next_vm_handle++;
  rt.vm_handles[id] = VmHandle{size, prop->location.id};
  *handle = id;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  SG_VMM_LOCKED(rt);
  auto h = rt.vm_handles.find(handle);
  if (h == rt.vm_handles.end() || h->second.released) return CUDA_ERROR_INVALID_VALUE;
  h->second.released = true;
  drop_if_done(rt, h);
  return CUDA_SUCCESS;
}

// Emulation limits: the whole handle at offset 0, and one mapping of a handle at a time.
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  if (offset != 0 || flags != 0 || ptr % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  SG_VMM_LOCKED(rt);
  auto h = rt.vm_handles.find(handle);
  if (h == rt.vm_handles.end() || h->second.released) return CUDA_ERROR_INVALID_HANDLE;
  if (h->second.bytes != size) return CUDA_ERROR_INVALID_VALUE;
  if (h->second.mappings > 0) return CUDA_ERROR_NOT_SUPPORTED;
  if (reservation_of(rt, ptr, size) == rt.reservations.end()) return CUDA_ERROR_INVALID_VALUE;
  auto next = rt.mappings.lower_bound(ptr);
  const bool overlaps =
      (next != rt.mappings.end() && next->first < ptr + size) ||
      (next != rt.mappings.begin() &&
       std::prev(next)->first + std::prev(next)->second.as_allocation.bytes > ptr);
  if (overlaps) return CUDA_ERROR_ALREADY_MAPPED;
  ++h->second.mappings;
  rt.mappings[ptr] = VmMapping{Allocation{size, h->second.device, false}, handle};
  return CUDA_SUCCESS;
}

// Any device given read-write access makes the range readable and writable by all (host
// memory has one protection); read-only or no access is not emulated.
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  SG_VMM_LOCKED(rt);
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    const CUresult r = check_device(rt, desc[i].location.id);
    if (r != CUDA_SUCCESS) return r;
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_NOT_SUPPORTED;
  }
  std::map<uintptr_t, VmMapping>::iterator first, last;
  if (!whole_mappings(rt, ptr, size, &first, &last)) return CUDA_ERROR_INVALID_VALUE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE) != 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// The pages go back at once: work still queued that touches them faults (CUDA does not
// promise to wait for it either).
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SG_VMM_LOCKED(rt);
  std::map<uintptr_t, VmMapping>::iterator first, last;
  if (!whole_mappings(rt, ptr, size, &first, &last)) return CUDA_ERROR_INVALID_VALUE;
  void* const p = reinterpret_cast<void*>(ptr);
  madvise(p, size, MADV_DONTNEED);
  mprotect(p, size, PROT_NONE);
  for (auto it = first; it != last;) {
    auto h = rt.vm_handles.find(it->second.handle);
    --h->second.mappings;
    drop_if_done(rt, h);
    it = rt.mappings.erase(it);
  }
  return CUDA_SUCCESS;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* driverStatus) {
  if (symbol == nullptr || funcPtr == nullptr || flags != cudaEnableDefault) {
    return internal::fail(cudaErrorInvalidValue,
                          "cudaGetDriverEntryPointByVersion: symbol or funcPtr is null, or "
                          "flags is not cudaEnableDefault");
  }
  struct Entry {
    const char* name;
    void* fn;
  };
  static const Entry kEntries[] = {
      {"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName)},
      {"cuDeviceGet", reinterpret_cast<void*>(&cuDeviceGet)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&cuDeviceGetAttribute)},
      {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&cuMemGetAllocationGranularity)},
      {"cuMemAddressReserve", reinterpret_cast<void*>(&cuMemAddressReserve)},
      {"cuMemAddressFree", reinterpret_cast<void*>(&cuMemAddressFree)},
      {"cuMemCreate", reinterpret_cast<void*>(&cuMemCreate)},
      {"cuMemRelease", reinterpret_cast<void*>(&cuMemRelease)},
      {"cuMemMap", reinterpret_cast<void*>(&cuMemMap)},
      {"cuMemSetAccess", reinterpret_cast<void*>(&cuMemSetAccess)},
      {"cuMemUnmap", reinterpret_cast<void*>(&cuMemUnmap)},
  };
  *funcPtr = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    // Every emulated function has had its present form since CUDA 10.2.
    if (cudaVersion < 10020) {
      status = cudaDriverEntryPointVersionNotSufficent;
    } else {
      status = cudaDriverEntryPointSuccess;
      *funcPtr = e.fn;
    }
  }
  if (driverStatus != nullptr) *driverStatus = status;
  return cudaSuccess;
}

}  // extern "C"

// The cuda backend's virtual memory (runtime/cuda/cuda_backend.h), behind the allocator's
// expandable segments: an address range reserved once per device, 2 MiB-class granules of
// device memory mapped into it and unmapped from its end. The driver functions are found
// at run time with cudaGetDriverEntryPointByVersion: linking the driver would stop every
// binary from starting where no NVIDIA driver is installed.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_backend.h"

namespace streamgrad {
namespace cuda_internal {
namespace {

// The driver functions this file calls; `complete` when every one was found.
struct Driver {
  decltype(&cuGetErrorName) error_name = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetAttribute) device_attribute = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemAddressReserve) address_reserve = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  bool complete = false;
};

const Driver& driver() {
  static const Driver found = [] {
    Driver d;
    bool all = true;
    const auto find = [&all](const char* name, auto& fn) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
      // 12000: the ABI these declarations have had since CUDA 12.0.
      if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status) !=
              cudaSuccess ||
          status != cudaDriverEntryPointSuccess || p == nullptr) {
        (void)cudaGetLastError();
        all = false;
        return;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    find("cuGetErrorName", d.error_name);
    find("cuDeviceGet", d.device_get);
    find("cuDeviceGetAttribute", d.device_attribute);
    find("cuMemGetAllocationGranularity", d.granularity);
    find("cuMemAddressReserve", d.address_reserve);
    find("cuMemCreate", d.create);
    find("cuMemRelease", d.release);
    find("cuMemMap", d.map);
    find("cuMemSetAccess", d.set_access);
    find("cuMemUnmap", d.unmap);
    d.complete = all;
    return d;
  }();
  return found;
}

void check_driver(CUresult r, const char* op, int device) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (driver().error_name == nullptr || driver().error_name(r, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "an unknown driver error";
  }
  throw DeviceError(absl::StrCat(
      op, " on cuda:", device, " failed: ", name, " (", static_cast<int>(r),
      "); the driver refused expandable segments' virtual memory; unset "
      "STREAMGRAD_ALLOC_CONF=expandable_segments:True to use whole segments"));
}

CUmemAllocationProp granule_prop(int index) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = index;
  return prop;
}

// 0 where the driver lacks the API or the device cannot map memory.
size_t query_granularity(int index) {
  const Driver& drv = driver();
  if (!drv.complete) return 0;
  CUdevice dev = 0;
  int supported = 0;
  if (drv.device_get(&dev, index) != CUDA_SUCCESS ||
      drv.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                           dev) != CUDA_SUCCESS ||
      supported == 0) {
    return 0;
  }
  const CUmemAllocationProp prop = granule_prop(dev);
  size_t granularity = 0;
  if (drv.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
      CUDA_SUCCESS) {
    return 0;
  }
  return granularity;
}

}  // namespace

size_t CudaBackend::vm_granularity(int index) const {
  PerDevice& d = devices_[index];
  std::lock_guard<std::mutex> lk(d.mu);
  if (!d.vm_known) {
    d.vm_granularity = query_granularity(index);
    d.vm_known = true;
  }
  return d.vm_granularity;
}

void* CudaBackend::vm_reserve(int index, size_t bytes) {
  DeviceSwitch on(index);
  // The driver's calls need the device's primary context, which this makes current.
  check(cudaFree(nullptr), "cudaFree(nullptr) (the context, for cuMemAddressReserve)", index);
  CUdeviceptr p = 0;
  const CUresult r = driver().address_reserve(&p, bytes, 0, 0, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  check_driver(r, "cuMemAddressReserve", index);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

bool CudaBackend::vm_map(int index, void* ptr, size_t bytes) {
  const size_t g = vm_granularity(index);
  const Driver& drv = driver();
  DeviceSwitch on(index);
  const CUmemAllocationProp prop = granule_prop(index);
  const CUdeviceptr at = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  std::vector<std::pair<CUdeviceptr, CUmemGenericAllocationHandle>> made;
  const auto undo = [&] {
    for (const auto& [page, handle] : made) {
      (void)drv.unmap(page, g);
      (void)drv.release(handle);
    }
  };
  const auto fail = [&](CUresult r, const char* op) {
    undo();
    check_driver(r, op, index);
  };
  for (size_t offset = 0; offset < bytes; offset += g) {
    CUmemGenericAllocationHandle handle = 0;
    const CUresult created = drv.create(&handle, g, &prop, 0);
    if (created == CUDA_ERROR_OUT_OF_MEMORY) {
      undo();
      return false;
    }
    if (created != CUDA_SUCCESS) fail(created, "cuMemCreate");
    const CUresult mapped = drv.map(at + offset, g, 0, handle, 0);
    if (mapped != CUDA_SUCCESS) {
      (void)drv.release(handle);
      fail(mapped, "cuMemMap");
    }
    made.emplace_back(at + offset, handle);
  }
  // The device itself, and each GPU that could reach it as a peer, so that a copy between
  // GPUs works whenever allow_peer_copy has enabled the pair.
  std::vector<CUmemAccessDesc> access;
  for (int dev = 0; dev < count_; ++dev) {
    int can = dev == index ? 1 : 0;
    if (dev != index && cudaDeviceCanAccessPeer(&can, dev, index) != cudaSuccess) {
      (void)cudaGetLastError();
      can = 0;
    }
    if (can == 0) continue;
    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = dev;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access.push_back(desc);
  }
  const CUresult granted = drv.set_access(at, bytes, access.data(), access.size());
  if (granted != CUDA_SUCCESS) fail(granted, "cuMemSetAccess");
  PerDevice& d = devices_[index];
  std::lock_guard<std::mutex> lk(d.mu);
  for (const auto& [page, handle] : made) d.vm_pages[page] = handle;
  return true;
}

void CudaBackend::vm_unmap(int index, void* ptr, size_t bytes) {
  const size_t g = vm_granularity(index);
  const Driver& drv = driver();
  DeviceSwitch on(index);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before unmapping memory)", index);
  const CUdeviceptr at = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  PerDevice& d = devices_[index];
  for (size_t offset = 0; offset < bytes; offset += g) {
    CUmemGenericAllocationHandle handle = 0;
    {
      std::lock_guard<std::mutex> lk(d.mu);
      auto it = d.vm_pages.find(at + offset);
      SG_CHECK(it != d.vm_pages.end(), InternalError, "vm_unmap on cuda:", index,
               ": no granule was mapped at offset ", offset, " of the ", bytes,
               " bytes to unmap");
      handle = it->second;
      d.vm_pages.erase(it);
    }
    check_driver(drv.unmap(at + offset, g), "cuMemUnmap", index);
    check_driver(drv.release(handle), "cuMemRelease", index);
  }
}

}  // namespace cuda_internal
}  // namespace streamgrad

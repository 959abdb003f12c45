// The emulated driver's virtual memory (include/cuda.h), reached as the project reaches it,
// through cudaGetDriverEntryPointByVersion: entry points by name and version; reserve,
// create, map, grant access; copies across two granules mapped side by side; memory
// counted from create until release and unmap; and the misuses CUDA refuses (a mapping
// over another, a part of a mapping unmapped, a range outside any reservation, a device
// out of memory, a reservation freed while mapped).
#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/runtime/cudaemu/cudart_test_util.h"

namespace streamgrad {
namespace {

using cudaemu_test::EnvScope;
using cudaemu_test::Fresh;

constexpr size_t kGranule = size_t{2} << 20;

template <typename Fn>
Fn entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  REQUIRE(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status) ==
          cudaSuccess);
  REQUIRE(status == cudaDriverEntryPointSuccess);
  REQUIRE(p != nullptr);
  return reinterpret_cast<Fn>(p);
}

CUmemAllocationProp prop_on(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

CUmemAccessDesc read_write(int device) {
  CUmemAccessDesc d{};
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = device;
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return d;
}

size_t free_bytes() {
  size_t free = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  return free;
}

// The driver functions through their entry points.
struct Vmm {
  decltype(&cuMemAddressReserve) reserve = entry<decltype(&cuMemAddressReserve)>("cuMemAddressReserve");
  decltype(&cuMemAddressFree) address_free = entry<decltype(&cuMemAddressFree)>("cuMemAddressFree");
  decltype(&cuMemCreate) create = entry<decltype(&cuMemCreate)>("cuMemCreate");
  decltype(&cuMemRelease) release = entry<decltype(&cuMemRelease)>("cuMemRelease");
  decltype(&cuMemMap) map = entry<decltype(&cuMemMap)>("cuMemMap");
  decltype(&cuMemSetAccess) set_access = entry<decltype(&cuMemSetAccess)>("cuMemSetAccess");
  decltype(&cuMemUnmap) unmap = entry<decltype(&cuMemUnmap)>("cuMemUnmap");

  CUmemGenericAllocationHandle granule(int device = 0) {
    CUmemGenericAllocationHandle h = 0;
    const CUmemAllocationProp prop = prop_on(device);
    REQUIRE(create(&h, kGranule, &prop, 0) == CUDA_SUCCESS);
    return h;
  }
};

TEST_CASE("driver entry points are found by name and version", "[cudaemu][vmm]") {
  Fresh fresh;
  for (const char* name : {"cuGetErrorName", "cuDeviceGet", "cuDeviceGetAttribute",
                           "cuMemGetAllocationGranularity", "cuMemAddressReserve",
                           "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap",
                           "cuMemSetAccess", "cuMemUnmap"}) {
    CAPTURE(name);
    (void)entry<void (*)()>(name);
  }
  void* p = reinterpret_cast<void*>(1);
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
  CHECK(cudaGetDriverEntryPointByVersion("cuMemMapArrayAsync", &p, 12000, cudaEnableDefault,
                                         &status) == cudaSuccess);
  CHECK(p == nullptr);
  CHECK(status == cudaDriverEntryPointSymbolNotFound);
  CHECK(cudaGetDriverEntryPointByVersion("cuMemCreate", &p, 10000, cudaEnableDefault,
                                         &status) == cudaSuccess);
  CHECK(p == nullptr);
  CHECK(status == cudaDriverEntryPointVersionNotSufficent);
  CHECK(cudaGetDriverEntryPointByVersion(nullptr, &p, 12000, cudaEnableDefault, &status) ==
        cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);

  const auto name_of = entry<decltype(&cuGetErrorName)>("cuGetErrorName");
  const char* s = nullptr;
  REQUIRE(name_of(CUDA_ERROR_ALREADY_MAPPED, &s) == CUDA_SUCCESS);
  CHECK(std::strcmp(s, "CUDA_ERROR_ALREADY_MAPPED") == 0);
}

TEST_CASE("emulated devices support virtual memory in 2 MiB granules", "[cudaemu][vmm]") {
  Fresh fresh;
  const auto get = entry<decltype(&cuDeviceGet)>("cuDeviceGet");
  const auto attribute = entry<decltype(&cuDeviceGetAttribute)>("cuDeviceGetAttribute");
  const auto granularity =
      entry<decltype(&cuMemGetAllocationGranularity)>("cuMemGetAllocationGranularity");
  CUdevice dev = -1;
  REQUIRE(get(&dev, 1) == CUDA_SUCCESS);
  CHECK(dev == 1);
  CHECK(get(&dev, 2) == CUDA_ERROR_INVALID_DEVICE);
  int supported = 0;
  REQUIRE(attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) ==
          CUDA_SUCCESS);
  CHECK(supported == 1);
  size_t g = 0;
  const CUmemAllocationProp prop = prop_on(0);
  REQUIRE(granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) == CUDA_SUCCESS);
  CHECK(g == kGranule);
  CUmemAllocationProp bad = prop_on(0);
  bad.location.id = 5;
  CHECK(granularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_ERROR_INVALID_DEVICE);
  bad = prop_on(0);
  bad.type = CU_MEM_ALLOCATION_TYPE_INVALID;
  CHECK(granularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("granules mapped side by side are one range of device memory", "[cudaemu][vmm]") {
  Fresh fresh;
  Vmm vmm;
  const size_t before = free_bytes();
  CUdeviceptr base = 0;
  REQUIRE(vmm.reserve(&base, 4 * kGranule, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(base % kGranule == 0);
  void* const p = reinterpret_cast<void*>(static_cast<uintptr_t>(base));
  cudaPointerAttributes attr{};
  REQUIRE(cudaPointerGetAttributes(&attr, p) == cudaSuccess);
  CHECK(attr.type == cudaMemoryTypeUnregistered);  // reserved, nothing behind it

  const CUmemGenericAllocationHandle a = vmm.granule(), b = vmm.granule();
  CHECK(free_bytes() == before - 2 * kGranule);  // counted from create on
  REQUIRE(vmm.map(base, kGranule, 0, a, 0) == CUDA_SUCCESS);
  REQUIRE(vmm.map(base + kGranule, kGranule, 0, b, 0) == CUDA_SUCCESS);
  const CUmemAccessDesc rw = read_write(0);
  REQUIRE(vmm.set_access(base, 2 * kGranule, &rw, 1) == CUDA_SUCCESS);
  REQUIRE(cudaPointerGetAttributes(&attr, p) == cudaSuccess);
  CHECK(attr.type == cudaMemoryTypeDevice);
  CHECK(attr.device == 0);

  // A copy across the two granules, there and back.
  const size_t n = kGranule;
  std::vector<unsigned char> out(n), in(n, 0);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(i * 7 + 1);
  char* const mid = static_cast<char*>(p) + kGranule / 2;
  REQUIRE(cudaMemcpy(mid, out.data(), n, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(in.data(), mid, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(in == out);
  // Past the mapped bytes: refused, as a copy past a cudaMalloc allocation is.
  CHECK(cudaMemcpy(in.data(), mid + kGranule, n, cudaMemcpyDeviceToHost) ==
        cudaErrorInvalidValue);
  (void)cudaGetLastError();

  // Released while mapped: still counted until unmapped.
  REQUIRE(vmm.release(a) == CUDA_SUCCESS);
  CHECK(vmm.release(a) == CUDA_ERROR_INVALID_VALUE);
  CHECK(free_bytes() == before - 2 * kGranule);
  CHECK(vmm.unmap(base, kGranule / 2) == CUDA_ERROR_INVALID_VALUE);  // part of a mapping
  CHECK(vmm.address_free(base, 4 * kGranule) == CUDA_ERROR_INVALID_VALUE);  // still mapped
  REQUIRE(vmm.unmap(base, 2 * kGranule) == CUDA_SUCCESS);  // both mappings at once
  CHECK(free_bytes() == before - kGranule);                // b is not released yet
  REQUIRE(cudaPointerGetAttributes(&attr, p) == cudaSuccess);
  CHECK(attr.type == cudaMemoryTypeUnregistered);

  // b again, elsewhere in the range: mapped memory starts without access.
  REQUIRE(vmm.map(base + 3 * kGranule, kGranule, 0, b, 0) == CUDA_SUCCESS);
  CHECK(vmm.map(base + 3 * kGranule, kGranule, 0, vmm.granule(), 0) ==
        CUDA_ERROR_ALREADY_MAPPED);
  REQUIRE(vmm.set_access(base + 3 * kGranule, kGranule, &rw, 1) == CUDA_SUCCESS);
  std::memset(reinterpret_cast<void*>(static_cast<uintptr_t>(base + 3 * kGranule)), 5, 64);
  REQUIRE(vmm.unmap(base + 3 * kGranule, kGranule) == CUDA_SUCCESS);
  REQUIRE(vmm.release(b) == CUDA_SUCCESS);
  REQUIRE(vmm.address_free(base, 4 * kGranule) == CUDA_SUCCESS);
}

TEST_CASE("the emulated driver refuses what CUDA refuses", "[cudaemu][vmm]") {
  Fresh fresh;
  Vmm vmm;
  CUdeviceptr base = 0;
  CHECK(vmm.reserve(&base, kGranule + 1, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(vmm.reserve(&base, 2 * kGranule, 0, 0, 0) == CUDA_SUCCESS);
  const CUmemGenericAllocationHandle h = vmm.granule();
  CHECK(vmm.map(base + 2 * kGranule, kGranule, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);  // outside
  CHECK(vmm.map(base, 2 * kGranule, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);  // not its size
  CHECK(vmm.map(base, kGranule, 0, h + 1000, 0) == CUDA_ERROR_INVALID_HANDLE);
  REQUIRE(vmm.map(base, kGranule, 0, h, 0) == CUDA_SUCCESS);
  CHECK(vmm.map(base + kGranule, kGranule, 0, h, 0) == CUDA_ERROR_NOT_SUPPORTED);  // emulation
  CUmemAccessDesc rw = read_write(0);
  CHECK(vmm.set_access(base, 2 * kGranule, &rw, 1) == CUDA_ERROR_INVALID_VALUE);  // a hole
  rw.location.id = 9;
  CHECK(vmm.set_access(base, kGranule, &rw, 1) == CUDA_ERROR_INVALID_DEVICE);
  CHECK(vmm.unmap(base + kGranule, kGranule) == CUDA_ERROR_INVALID_VALUE);  // nothing there
  CUmemGenericAllocationHandle none = 0;
  const CUmemAllocationProp prop = prop_on(0);
  CHECK(vmm.create(&none, kGranule / 2, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("creating past the device's memory is out of memory", "[cudaemu][vmm]") {
  Fresh fresh;
  EnvScope small("STREAMGRAD_CUDAEMU_MEMORY_BYTES", "5242880");  // 5 MiB: two granules
  Vmm vmm;
  const CUmemGenericAllocationHandle a = vmm.granule(), b = vmm.granule();
  CUmemGenericAllocationHandle c = 0;
  const CUmemAllocationProp prop = prop_on(0);
  CHECK(vmm.create(&c, kGranule, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  void* p = nullptr;
  CHECK(cudaMalloc(&p, kGranule) == cudaErrorMemoryAllocation);  // one budget for both
  (void)cudaGetLastError();
  REQUIRE(vmm.release(a) == CUDA_SUCCESS);
  REQUIRE(vmm.create(&c, kGranule, &prop, 0) == CUDA_SUCCESS);
  REQUIRE(vmm.release(b) == CUDA_SUCCESS);
  REQUIRE(vmm.release(c) == CUDA_SUCCESS);
}

}  // namespace
}  // namespace streamgrad

// The part of the CUDA driver API the project calls, as the interpreted CUDA device
// (runtime/cudaemu) provides it: the virtual memory management functions behind the
// allocator's expandable segments (cuMemAddressReserve, cuMemCreate, cuMemMap,
// cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemAddressFree,
// cuMemGetAllocationGranularity), device attributes and error names, with the toolkit's
// names, values and documented semantics (implemented in cuda_vmm.cc). The project never
// links the driver: it reaches these functions through cudaGetDriverEntryPointByVersion
// (cuda_runtime_api.h), as it does on a real GPU, so a binary starts where no driver is
// installed. Sources that include <cuda.h> compile against this header when they depend on
// //runtime/cudaemu:cudart.
//
// Emulation: a reserved range is an anonymous mapping with no access; cuMemCreate accounts
// the bytes against the device's totalGlobalMem (as cudaMalloc); cuMemSetAccess makes a
// mapped range readable and writable; cuMemUnmap takes the access away and hands the pages
// back at once, so work still queued that touches them faults, as it may on a GPU (the
// caller must wait for such work first). The granularity is 2 MiB, as on current GPUs.
//
// Thread-safety: every function may be called from any thread. Failure: every function
// returns a CUresult and never throws; none of them sets the runtime's last error.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_H_

#include <cstddef>

#define CUDA_VERSION 12080

typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_ALREADY_MAPPED = 208,
  CUDA_ERROR_NOT_MAPPED = 211,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
} CUresult;

typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
} CUdevice_attribute;

typedef enum CUmemAllocationType_enum {
  CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
  CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
} CUmemAllocationHandleType;

typedef enum CUmemLocationType_enum {
  CU_MEM_LOCATION_TYPE_INVALID = 0x0,
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
} CUmemLocationType;

typedef enum CUmemAccess_flags_enum {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
} CUmemAccess_flags;

typedef enum CUmemAllocationGranularity_flags_enum {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
} CUmemAllocationGranularity_flags;

typedef struct CUmemLocation_st {
  CUmemLocationType type;
  int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  CUmemAccess_flags flags;
} CUmemAccessDesc;

#define CUDAAPI

extern "C" {
CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr);
CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal);
CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev);
CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity,
                                               const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags option);
CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags);
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                             const CUmemAllocationProp* prop, unsigned long long flags);
CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags);
CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                size_t count);
CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size);
}

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_H_

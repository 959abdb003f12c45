// The CUDA runtime API as the interpreted CUDA device (issue 27) provides it: the types,
// enums and functions streamgrad's CUDA sources call, with the toolkit's names and
// documented semantics, implemented on the CPU over the sim backend's asynchronous stream
// executor (runtime/cudaemu/cudart_*.cc). Sources that include <cuda_runtime_api.h> compile
// against this header when they depend on //runtime/cudaemu:cudart; never link that target
// together with the real toolkit (@local_cuda).
//
// Offers: cudaError_t and its codes, cudaGetErrorName / String, cudaGetLastError /
// cudaPeekAtLastError (per host thread); devices (count, current device per host thread,
// properties, PCI id, versions, stream priorities, peer access); device and page-locked
// host memory (cudaMalloc, cudaFree, cudaMemGetInfo, cudaHostAlloc, cudaMallocHost,
// cudaFreeHost, cudaPointerGetAttributes); copies and fills (cudaMemcpy, cudaMemcpyAsync,
// cudaMemsetAsync); streams (incl. the legacy default stream 0 / cudaStreamLegacy), events,
// cudaDeviceSynchronize; cudaGetDriverEntryPointByVersion for the driver functions of
// cuda.h. cudaemu_runtime.h says where the emulation differs from CUDA.
//
// Thread-safety: every function may be called from any host thread, as in CUDA; the current
// device and the last error are per host thread. Functions called from inside work running
// on a stream (a task) that would enqueue or wait return cudaErrorNotPermitted.
// Failure: every function returns a cudaError_t and never throws; a failing call also sets
// the calling thread's last error. An exception thrown by work on a stream becomes the
// device's sticky error (cudaErrorIllegalAddress or cudaErrorLaunchFailure), returned by
// every later call that touches that device.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_RUNTIME_API_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_RUNTIME_API_H_

#include <cstddef>

#define CUDART_VERSION 12080
#define STREAMGRAD_CUDAEMU 1  // lets a source tell the emulation from the toolkit

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorCudartUnloading = 4,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchTimeout = 702,
  cudaErrorPeerAccessAlreadyEnabled = 704,
  cudaErrorPeerAccessNotEnabled = 705,
  cudaErrorAssert = 710,
  cudaErrorHardwareStackError = 714,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorInvalidAddressSpace = 717,
  cudaErrorInvalidPc = 718,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotPermitted = 800,
  cudaErrorNotSupported = 801,
  cudaErrorDevicesUnavailable = 46,
  cudaErrorECCUncorrectable = 214,
  cudaErrorUnknown = 999,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};

struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};

// The fields streamgrad reads and the ones kernels commonly size launches with.
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major;
  int minor;
  int multiProcessorCount;
  int concurrentKernels;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryClockRate;
  int memoryBusWidth;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  int canMapHostMemory;
  size_t sharedMemPerBlockOptin;
  size_t sharedMemPerMultiprocessor;
};

// Handles, opaque as in CUDA. Stream 0 (and cudaStreamLegacy) is the current device's
// legacy default stream.
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
// The per-thread default stream is not emulated: the handle exists (code may compare
// with it), and every call given it answers cudaErrorInvalidResourceHandle.
#define cudaStreamPerThread ((cudaStream_t)0x2)

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04

// cudaGetDriverEntryPointByVersion: how the project reaches the driver API (cuda.h)
// without linking the driver.
enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficent = 2,  // sic, as the toolkit spells it
};
#define cudaEnableDefault 0x0

extern "C" {

const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device);
cudaError_t cudaRuntimeGetVersion(int* runtimeVersion);
cudaError_t cudaDriverGetVersion(int* driverVersion);
cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice);
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
cudaError_t cudaDeviceSynchronize(void);
// The emulated driver functions of cuda.h, by name, for cudaVersion 12000 or later.
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult* driverStatus =
                                                 nullptr);

cudaError_t cudaMalloc(void** devPtr, size_t size);
cudaError_t cudaFree(void* devPtr);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags);
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream = 0);

cudaError_t cudaStreamCreate(cudaStream_t* pStream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags,
                                         int priority);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

}  // extern "C"

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_RUNTIME_API_H_

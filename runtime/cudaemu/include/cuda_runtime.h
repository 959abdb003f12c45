// <cuda_runtime.h> of the interpreted CUDA device (issue 27): the runtime API
// (cuda_runtime_api.h), the execution model kernel sources need (runtime/cudaemu/cuda_emu.h:
// __global__, threadIdx, __syncthreads, emu_launch, ...), and the typed overloads the
// toolkit's header adds for C++ (cudaMalloc(T**), cudaMallocHost(T**), cudaHostAlloc(T**)).
//
// Thread-safety and failure: as cuda_runtime_api.h and cuda_emu.h say.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_RUNTIME_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_RUNTIME_H_

#include <cstddef>

#include "cuda_runtime_api.h"
#include "runtime/cudaemu/cuda_emu.h"

template <class T>
inline cudaError_t cudaMalloc(T** devPtr, size_t size) {
  return ::cudaMalloc(reinterpret_cast<void**>(devPtr), size);
}

template <class T>
inline cudaError_t cudaMallocHost(T** ptr, size_t size) {
  return ::cudaMallocHost(reinterpret_cast<void**>(ptr), size);
}

template <class T>
inline cudaError_t cudaHostAlloc(T** ptr, size_t size, unsigned int flags) {
  return ::cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDA_RUNTIME_H_

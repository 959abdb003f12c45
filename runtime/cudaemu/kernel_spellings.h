// The spellings of shared memory that both nvcc and the interpreted CUDA device understand
// (cuda_emu.h says what they do there). Kernel sources include this header, which costs
// an nvcc build nothing: under nvcc the two are plain CUDA.
//
//   SG_SHARED_ARRAY(T, name, N)   `__shared__ T name[N]`: one array per block.
//   sg_dynamic_shared<T>()        the launch's dynamic shared memory (`extern __shared__`).
//
// In the interpreted configuration (no __CUDACC__) the header is cuda_emu.h, where the
// array is bounds-checked and refilled with 0xFF bytes for each block.
// Thread-safety and failure: declarations only.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_KERNEL_SPELLINGS_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_KERNEL_SPELLINGS_H_

#if defined(__CUDACC__)

#define SG_SHARED_ARRAY(T, name, N) __shared__ T name[N]

template <typename T>
__device__ __forceinline__ T* sg_dynamic_shared() {
  extern __shared__ __align__(16) unsigned char sg_dynamic_smem[];
  return reinterpret_cast<T*>(sg_dynamic_smem);
}

#else

#include "runtime/cudaemu/cuda_emu.h"

#endif  // __CUDACC__

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_KERNEL_SPELLINGS_H_

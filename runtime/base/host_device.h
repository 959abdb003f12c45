// SG_HOST_DEVICE: marks per-element math that the cpu kernels call today and that CUDA
// kernels will call unchanged (it expands to __host__ __device__ under nvcc, to nothing
// elsewhere), so both backends compute each element with the same code.
//
// SG_INLINE: the per-element functors are always inlined, at every optimisation level.
// The cpu loops are compiled once per instruction-set level (kernels/host/loops.h); an
// out-of-line copy of a shared inline function would be emitted by each level's object
// and the linker would keep one of them, so baseline code could end up calling AVX-512
// code. Forced inlining leaves no such copy.
//
// Thread-safety and failure: macros only.
#ifndef STREAMGRAD_RUNTIME_BASE_HOST_DEVICE_H_
#define STREAMGRAD_RUNTIME_BASE_HOST_DEVICE_H_

#ifdef __CUDACC__
#define SG_HOST_DEVICE __host__ __device__
#define SG_INLINE __forceinline__
#elif defined(__GNUC__)
#define SG_HOST_DEVICE
#define SG_INLINE inline __attribute__((always_inline))
#else
#define SG_HOST_DEVICE
#define SG_INLINE inline
#endif

#endif  // STREAMGRAD_RUNTIME_BASE_HOST_DEVICE_H_

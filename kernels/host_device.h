// SG_HOST_DEVICE: marks per-element math that the cpu kernels call today and that CUDA
// kernels will call unchanged (it expands to __host__ __device__ under nvcc, to nothing
// elsewhere), so both backends compute each element with the same code.
//
// Thread-safety and failure: a macro only.
#ifndef STREAMGRAD_KERNELS_HOST_DEVICE_H_
#define STREAMGRAD_KERNELS_HOST_DEVICE_H_

#ifdef __CUDACC__
#define SG_HOST_DEVICE __host__ __device__
#else
#define SG_HOST_DEVICE
#endif

#endif  // STREAMGRAD_KERNELS_HOST_DEVICE_H_

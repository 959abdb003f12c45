// CUDA's vector types of the launch geometry, and the built-in variables that hold the
// current emulated thread's position: threadIdx, blockIdx (uint3), blockDim, gridDim
// (dim3), warpSize. They are in the global namespace, as CUDA declares them, so kernel
// source reads them unqualified.
//
// Thread-safety: the built-ins are thread_local; the scheduler (block_runner.cc) sets
// them on the OS thread that runs the block, before every switch to an emulated thread.
// Outside a launch they read 0 (threadIdx, blockIdx) and 1 (blockDim, gridDim).
// Failure: none (plain values).
// Under nvcc this header declares nothing (the compiler provides all of it).
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_DIM3_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_DIM3_H_

#if !defined(__CUDACC__)

struct uint3 {
  unsigned int x, y, z;
};

// Unspecified components are 1, as in CUDA.
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}  // NOLINT: implicit as in CUDA
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// initial-exec: the scheduler writes threadIdx before every switch, and in a shared library
// the default model makes each access a __tls_get_addr call, which ASan intercepts (about a
// tenth of an interpreted reduction's time). The libraries that use these are loaded at
// startup, never dlopen'ed, so the static TLS block holds them.
#define SG_EMU_TLS thread_local __attribute__((tls_model("initial-exec")))
inline SG_EMU_TLS uint3 threadIdx{0, 0, 0};
inline SG_EMU_TLS uint3 blockIdx{0, 0, 0};
inline SG_EMU_TLS dim3 blockDim{1, 1, 1};
inline SG_EMU_TLS dim3 gridDim{1, 1, 1};
constexpr int warpSize = 32;

#endif  // !__CUDACC__

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_DIM3_H_

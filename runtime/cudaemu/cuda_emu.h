// What a CUDA kernel source needs when it is compiled by g++ instead of nvcc: the CUDA
// execution model on the CPU (issue 27's interpreted CUDA device). Include it where the
// source includes <cuda_runtime.h>; launch with emu_launch() (emu_launch.h, included).
//
// Offers (global names, as CUDA spells them):
//   __global__, __device__, __host__, __forceinline__, __constant__,
//   __launch_bounds__(...)   host C++ equivalents (the qualifiers vanish; launch bounds
//                            are not checked).
//   dim3, uint3, threadIdx, blockIdx, blockDim, gridDim, warpSize   (dim3.h) the current
//                            emulated thread's values.
//   __syncthreads(), __syncthreads_count / _and / _or(predicate)   block barriers.
//   __syncwarp, __shfl_sync, __shfl_up_sync, __shfl_down_sync, __shfl_xor_sync,
//   __ballot_sync, __any_sync, __all_sync   warp collectives: every lane named in the mask
//                            must arrive before any lane gets its value.
//   atomics and bit casts    (emu_atomics.h).
//   __nanosleep(ns), __ldg(p)   a no-op and a plain load.
//   SG_SHARED_ARRAY(T, name, N)   a static shared array, one per block. Under nvcc it is
//                            `__shared__ T name[N]`; here `name` is a bounds-checked array
//                            object (operator[] throws on an index outside [0, N), naming
//                            the array, index, size, block and thread; `name` converts to
//                            T* like the array would, unchecked). Each block starts it as
//                            0xFF bytes (NaN, -1), so reads before writes stand out.
//   sg_dynamic_shared<T>()   the launch's dynamic shared memory (`extern __shared__`):
//                            under nvcc a T*, here a checked view of shared_bytes /
//                            sizeof(T) elements; use it as `auto s = sg_dynamic_shared<T>();`.
//   __shared__               `static thread_local`: one array per OS thread, which is one
//                            per block because an OS thread runs one block at a time and
//                            blocks do not overlap. Unchecked and not refilled between
//                            blocks (a GPU leaves it undefined too); prefer
//                            SG_SHARED_ARRAY. `extern __shared__` does not compile: use
//                            sg_dynamic_shared.
//
// Emulation model: see block_runner.h (blocks run one after another on the launching OS
// thread; a block's threads are fibers that take turns at barriers and collectives, in a
// seeded shuffled order by default). Not emulated: the `<<<...>>>` launch syntax, streams,
// cooperative groups, texture and surface memory, warp-level independent scheduling
// between collectives, memory-model races between threads of a block (threads only
// interleave at barriers and collectives).
//
// Compiling existing .cu kernels: g++ -Wall warns where nvcc's device compiler does not,
// on `#pragma unroll` (-Wunknown-pragmas) and on `threadIdx.x < w` with an int w
// (-Wsign-compare); a target of emulated kernels needs -Wno-unknown-pragmas and
// -Wno-sign-compare (checked against copies of reduce.cu's, index.cu's and
// layer_norm.cu's kernels). The CUDA runtime API (cudaGetLastError, streams, memcpy) is
// not part of this header.
//
// Thread-safety: kernels may be launched from several OS threads at once; atomics are
// real atomics. Failure: every misuse the device would punish is a streamgrad::DeviceError
// (block_runner.h lists them); builtins called from host code throw DeviceError too.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_CUDA_EMU_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_CUDA_EMU_H_

#if defined(__CUDACC__)

// nvcc provides the execution model; only the two portable spellings are ours.
#include "runtime/cudaemu/kernel_spellings.h"

#else  // emulation

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/cudaemu/block_runner.h"
#include "runtime/cudaemu/dim3.h"
#include "runtime/cudaemu/emu_atomics.h"
#include "runtime/cudaemu/emu_launch.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__
#define __launch_bounds__(...)
#define __shared__ static thread_local

inline void __syncthreads() {
  ::streamgrad::cudaemu::internal::sync_threads(
      ::streamgrad::cudaemu::internal::Barrier::kPlain, 0);
}
inline int __syncthreads_count(int predicate) {
  return ::streamgrad::cudaemu::internal::sync_threads(
      ::streamgrad::cudaemu::internal::Barrier::kCount, predicate);
}
inline int __syncthreads_and(int predicate) {
  return ::streamgrad::cudaemu::internal::sync_threads(
      ::streamgrad::cudaemu::internal::Barrier::kAnd, predicate);
}
inline int __syncthreads_or(int predicate) {
  return ::streamgrad::cudaemu::internal::sync_threads(
      ::streamgrad::cudaemu::internal::Barrier::kOr, predicate);
}

inline void __nanosleep(unsigned int) {}
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

namespace streamgrad {
namespace cudaemu {
namespace internal {

template <typename T>
inline T shuffle(Collective kind, const char* builtin, unsigned mask, T var, int arg, int width) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "warp shuffles move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  bits = warp_collective(kind, builtin, mask, bits, arg, width);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

// A bounds-checked view of shared memory, as SG_SHARED_ARRAY and sg_dynamic_shared
// give it to kernels.
template <typename T>
class SharedView {
 public:
  SharedView(T* data, size_t size, const char* name) : data_(data), size_(size), name_(name) {}
  template <typename I, typename = std::enable_if_t<std::is_integral<I>::value>>
  T& operator[](I i) const {
    bool negative = false;
    if constexpr (std::is_signed<I>::value) negative = i < 0;
    if (negative || static_cast<unsigned long long>(i) >= size_) {
      shared_index_error(name_, static_cast<long long>(i), size_);
    }
    return data_[i];
  }
  operator T*() const { return data_; }  // NOLINT: decays like the array it stands for
  T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  T* data_;
  size_t size_;
  const char* name_;
};

// The block's array of one SG_SHARED_ARRAY declaration: `Tag` is a lambda type unique to
// the declaration (and to each instantiation of an enclosing template).
template <typename T, size_t N, typename Tag>
inline SharedView<T> shared_array(const char* name, Tag) {
  static_assert(std::is_trivially_copyable<T>::value && std::is_trivially_destructible<T>::value,
                "shared memory holds trivial types, as on the GPU");
  static const char key = 0;
  return SharedView<T>(static_cast<T*>(block_shared(&key, sizeof(T) * N, name)), N, name);
}

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad

#define SG_SHARED_ARRAY(T, name, N)                                          \
  const ::streamgrad::cudaemu::internal::SharedView<T> name =                \
      ::streamgrad::cudaemu::internal::shared_array<T, (N)>(#name, [] {})

template <typename T>
inline ::streamgrad::cudaemu::internal::SharedView<T> sg_dynamic_shared() {
  size_t bytes = 0;
  void* p = ::streamgrad::cudaemu::internal::dynamic_shared(&bytes);
  return ::streamgrad::cudaemu::internal::SharedView<T>(static_cast<T*>(p), bytes / sizeof(T),
                                                        "dynamic shared memory");
}

inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) {
  ::streamgrad::cudaemu::internal::warp_collective(
      ::streamgrad::cudaemu::internal::Collective::kSyncWarp, "__syncwarp", mask, 0, 0, 32);
}
template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return ::streamgrad::cudaemu::internal::shuffle(
      ::streamgrad::cudaemu::internal::Collective::kShflIdx, "__shfl_sync", mask, var, src_lane,
      width);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::streamgrad::cudaemu::internal::shuffle(
      ::streamgrad::cudaemu::internal::Collective::kShflUp, "__shfl_up_sync", mask, var,
      static_cast<int>(delta), width);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::streamgrad::cudaemu::internal::shuffle(
      ::streamgrad::cudaemu::internal::Collective::kShflDown, "__shfl_down_sync", mask, var,
      static_cast<int>(delta), width);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  return ::streamgrad::cudaemu::internal::shuffle(
      ::streamgrad::cudaemu::internal::Collective::kShflXor, "__shfl_xor_sync", mask, var,
      lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(::streamgrad::cudaemu::internal::warp_collective(
      ::streamgrad::cudaemu::internal::Collective::kBallot, "__ballot_sync", mask,
      predicate != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int predicate) {
  return ::streamgrad::cudaemu::internal::warp_collective(
             ::streamgrad::cudaemu::internal::Collective::kBallot, "__any_sync", mask,
             predicate != 0, 0, 32) != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  return ::streamgrad::cudaemu::internal::warp_collective(
             ::streamgrad::cudaemu::internal::Collective::kBallot, "__all_sync", mask,
             predicate != 0, 0, 32) == mask;
}

#endif  // __CUDACC__

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_CUDA_EMU_H_

// CUDA's atomic functions and bit reinterpretations for emulated kernels (included by
// runtime/cudaemu/cuda_emu.h; under nvcc it declares nothing).
//
// Offers, with CUDA's signatures, each returning the value before the operation:
//   atomicAdd     int, unsigned, unsigned long long, float, double
//   atomicSub     int, unsigned
//   atomicCAS     int, unsigned, unsigned long long (returns the old value whether or not
//                 it swapped)
//   atomicMin / atomicMax   int, unsigned, long long, unsigned long long
//   atomicAnd / atomicOr / atomicXor   int, unsigned, unsigned long long
//   atomicExch    int, unsigned, unsigned long long, float
//   __float_as_uint, __uint_as_float, __float_as_int, __int_as_float,
//   __double_as_longlong, __longlong_as_double   (bit copies, no conversion)
//   __threadfence, __threadfence_block: compiler barriers (the emulated threads of a
//   launch run on one OS thread, so no hardware fence is needed).
//
// Thread-safety: every atomic is a real read-modify-write (__atomic builtins, sequentially
// consistent), so kernels launched from several OS threads at once may share counters.
// Floating-point adds and the min / max on 64-bit types are compare-and-swap loops.
// Failure: none; the address must be valid and aligned, as on the GPU.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_EMU_ATOMICS_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_EMU_ATOMICS_H_

#if !defined(__CUDACC__)

#include <cstring>

namespace streamgrad {
namespace cudaemu {
namespace internal {

template <typename To, typename From>
inline To bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit copies keep the size");
  To r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}

// *p = f(*p) atomically on the bits of a T stored as the same-sized integer U.
template <typename U, typename T, typename F>
inline T atomic_update(T* p, F f) {
  typedef U __attribute__((may_alias)) AliasU;
  auto* bits = reinterpret_cast<AliasU*>(p);
  U old = __atomic_load_n(bits, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(bits, &old, bits_as<U>(f(bits_as<T>(old))), false,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return bits_as<T>(old);
}

template <typename T>
inline T atomic_cas(T* p, T compare, T value) {
  __atomic_compare_exchange_n(p, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // on failure it holds the value found
}

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad

#define SG_EMU_INTEGER_ATOMICS(T)                                                        \
  inline T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }   \
  inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }   \
  inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }     \
  inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }   \
  inline T atomicExch(T* a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
  inline T atomicCAS(T* a, T compare, T v) {                                             \
    return ::streamgrad::cudaemu::internal::atomic_cas(a, compare, v);                   \
  }
SG_EMU_INTEGER_ATOMICS(int)
SG_EMU_INTEGER_ATOMICS(unsigned int)
SG_EMU_INTEGER_ATOMICS(unsigned long long)
#undef SG_EMU_INTEGER_ATOMICS

inline int atomicSub(int* a, int v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }
inline unsigned int atomicSub(unsigned int* a, unsigned int v) {
  return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);
}

#define SG_EMU_MIN_MAX(T)                                                     \
  inline T atomicMin(T* a, T v) {                                             \
    return ::streamgrad::cudaemu::internal::atomic_update<T>(                 \
        a, [v](T o) { return v < o ? v : o; });                               \
  }                                                                           \
  inline T atomicMax(T* a, T v) {                                             \
    return ::streamgrad::cudaemu::internal::atomic_update<T>(                 \
        a, [v](T o) { return v > o ? v : o; });                               \
  }
SG_EMU_MIN_MAX(int)
SG_EMU_MIN_MAX(unsigned int)
SG_EMU_MIN_MAX(long long)
SG_EMU_MIN_MAX(unsigned long long)
#undef SG_EMU_MIN_MAX

inline float atomicAdd(float* a, float v) {
  return ::streamgrad::cudaemu::internal::atomic_update<unsigned int>(
      a, [v](float o) { return o + v; });
}
inline double atomicAdd(double* a, double v) {
  return ::streamgrad::cudaemu::internal::atomic_update<unsigned long long>(
      a, [v](double o) { return o + v; });
}
inline float atomicExch(float* a, float v) {
  return ::streamgrad::cudaemu::internal::atomic_update<unsigned int>(a, [v](float) { return v; });
}

inline unsigned int __float_as_uint(float x) {
  return ::streamgrad::cudaemu::internal::bits_as<unsigned int>(x);
}
inline float __uint_as_float(unsigned int x) {
  return ::streamgrad::cudaemu::internal::bits_as<float>(x);
}
inline int __float_as_int(float x) { return ::streamgrad::cudaemu::internal::bits_as<int>(x); }
inline float __int_as_float(int x) { return ::streamgrad::cudaemu::internal::bits_as<float>(x); }
inline long long __double_as_longlong(double x) {
  return ::streamgrad::cudaemu::internal::bits_as<long long>(x);
}
inline double __longlong_as_double(long long x) {
  return ::streamgrad::cudaemu::internal::bits_as<double>(x);
}

inline void __threadfence() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

#endif  // !__CUDACC__

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_EMU_ATOMICS_H_

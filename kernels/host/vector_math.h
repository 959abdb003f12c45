// Internal to the per-level loops (kernels/host/elementwise_rows.h): the transcendental
// functions of kernels/functors/math_fns.h over a block of contiguous elements, in the
// vector width of the level being compiled (SG_CPU_LEVEL_*): 4/2 lanes (float/double) on
// the baseline level, 8/4 on avx2, 16/8 on avx512, in the flavour math_fns.h says the
// process uses (with or without FMA: each level has both). SLEEF
// defines its deterministic functions to give the scalar function's bits at every width,
// so a block's result does not depend on the level, on where a thread's range starts or
// on how long it is. The tail of a block runs in a full vector of copies. NaN signs are
// left as SLEEF makes them: the loops make every NaN the functor returns the positive
// quiet NaN once, after the rest of its math (a NaN stays NaN through it).
//
// Everything here is inline and file-local (loops.h: a level's objects define nothing
// outside its namespace).
//
// Thread-safety: pure functions on caller-owned memory. Failure: none.
#ifndef STREAMGRAD_KERNELS_HOST_VECTOR_MATH_H_
#define STREAMGRAD_KERNELS_HOST_VECTOR_MATH_H_

#include <math.h>
#include <sleef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/functors/math_fns.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace SG_CPU_LEVEL {
namespace {

// SG_VM_NAMES(Fma, flavour, isa, wf, wd) defines Fma's v_<fn> for float vectors of width wf
// and double vectors of width wd through SLEEF's Sleef_<flavour>_<fn><w>_u10<isa>.
#define SG_VM_FN(flavour, isa, wf, wd, fn)                                                 \
  static SG_INLINE VecF v_##fn(VecF v) { return Sleef_##flavour##_##fn##f##wf##_u10##isa(v); } \
  static SG_INLINE VecD v_##fn(VecD v) { return Sleef_##flavour##_##fn##d##wd##_u10##isa(v); }
#define SG_VM_NAMES(kFma, flavour, isa, wf, wd)                                            \
  template <>                                                                              \
  struct Flavour<kFma> {                                                                   \
    SG_VM_FN(flavour, isa, wf, wd, exp)                                                    \
    SG_VM_FN(flavour, isa, wf, wd, log)                                                    \
    SG_VM_FN(flavour, isa, wf, wd, log1p)                                                  \
    SG_VM_FN(flavour, isa, wf, wd, tanh)                                                   \
    SG_VM_FN(flavour, isa, wf, wd, erf)                                                    \
    SG_VM_FN(flavour, isa, wf, wd, sin)                                                    \
    SG_VM_FN(flavour, isa, wf, wd, cos)                                                    \
    static SG_INLINE VecF v_pow(VecF a, VecF b) {                                          \
      return Sleef_##flavour##_powf##wf##_u10##isa(a, b);                                  \
    }                                                                                      \
    static SG_INLINE VecD v_pow(VecD a, VecD b) {                                          \
      return Sleef_##flavour##_powd##wd##_u10##isa(a, b);                                  \
    }                                                                                      \
  };

// SLEEF's functions in one flavour: true for the FMA ("finz") functions.
template <bool kFma>
struct Flavour;

#if defined(SG_CPU_LEVEL_AVX512)
using VecF = __m512;
using VecD = __m512d;
SG_INLINE VecF v_load(const float* p) { return _mm512_loadu_ps(p); }
SG_INLINE VecD v_load(const double* p) { return _mm512_loadu_pd(p); }
SG_INLINE void v_store(float* p, VecF v) { _mm512_storeu_ps(p, v); }
SG_INLINE void v_store(double* p, VecD v) { _mm512_storeu_pd(p, v); }
SG_VM_NAMES(true, finz, avx512f, 16, 8)
SG_VM_NAMES(false, cinz, avx512fnofma, 16, 8)
#elif defined(SG_CPU_LEVEL_AVX2)
using VecF = __m256;
using VecD = __m256d;
SG_INLINE VecF v_load(const float* p) { return _mm256_loadu_ps(p); }
SG_INLINE VecD v_load(const double* p) { return _mm256_loadu_pd(p); }
SG_INLINE void v_store(float* p, VecF v) { _mm256_storeu_ps(p, v); }
SG_INLINE void v_store(double* p, VecD v) { _mm256_storeu_pd(p, v); }
SG_VM_NAMES(true, finz, avx2, 8, 4)
SG_VM_NAMES(false, cinz, avx, 8, 4)
#elif defined(__SSE2__)
// The baseline level: 128-bit vectors, through SLEEF's 128-bit AVX2 build of the FMA
// functions where the machine has them, else its SSE2 build of the ones without.
using VecF = __m128;
using VecD = __m128d;
SG_INLINE VecF v_load(const float* p) { return _mm_loadu_ps(p); }
SG_INLINE VecD v_load(const double* p) { return _mm_loadu_pd(p); }
SG_INLINE void v_store(float* p, VecF v) { _mm_storeu_ps(p, v); }
SG_INLINE void v_store(double* p, VecD v) { _mm_storeu_pd(p, v); }
SG_VM_NAMES(true, finz, avx2128, 4, 2)
SG_VM_NAMES(false, cinz, sse2, 4, 2)
#else
#define SG_NO_VECTOR_MATH 1
#endif
#undef SG_VM_NAMES
#undef SG_VM_FN

#if !defined(SG_NO_VECTOR_MATH)
template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  using V = VecF;
  static constexpr int kLanes = sizeof(VecF) / sizeof(float);
};
template <>
struct VecOf<double> {
  using V = VecD;
  static constexpr int kLanes = sizeof(VecD) / sizeof(double);
};

// The function F of one vector (pow: a ^ b; the others ignore b).
template <MathFn F, bool kFma, typename V>
SG_INLINE V v_call(V a, V b) {
  using S = Flavour<kFma>;
  if constexpr (F == MathFn::kExp) return S::v_exp(a);
  if constexpr (F == MathFn::kLog) return S::v_log(a);
  if constexpr (F == MathFn::kLog1p) return S::v_log1p(a);
  if constexpr (F == MathFn::kTanh) return S::v_tanh(a);
  if constexpr (F == MathFn::kErf) return S::v_erf(a);
  if constexpr (F == MathFn::kSin) return S::v_sin(a);
  if constexpr (F == MathFn::kCos) return S::v_cos(a);
  if constexpr (F == MathFn::kPow) return S::v_pow(a, b);
  (void)b;
}

template <MathFn F, bool kFma, typename T>
SG_INLINE void apply_vectors(T* t, const T* u, int64_t m) {
  using V = typename VecOf<T>::V;
  constexpr int kLanes = VecOf<T>::kLanes;
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    const V b = F == MathFn::kPow ? v_load(u + i) : V{};
    v_store(t + i, v_call<F, kFma>(v_load(t + i), b));
  }
  if (i < m) {
    // The tail in a full vector: the lanes past m hold copies of t[i] (any value would
    // do: lanes do not mix).
    T a[kLanes], b[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      a[j] = t[i + (i + j < m ? j : 0)];
      b[j] = F == MathFn::kPow ? u[i + (i + j < m ? j : 0)] : T(0);
    }
    v_store(a, v_call<F, kFma>(v_load(a), v_load(b)));
    for (int64_t j = 0; i + j < m; ++j) t[i + j] = a[j];
  }
}
#else
template <MathFn F, typename T>
SG_INLINE T s_call(T a, T b) {
  if constexpr (F == MathFn::kExp) return math::exp(a);
  if constexpr (F == MathFn::kLog) return math::log(a);
  if constexpr (F == MathFn::kLog1p) return math::log1p(a);
  if constexpr (F == MathFn::kTanh) return math::tanh(a);
  if constexpr (F == MathFn::kErf) return math::erf(a);
  if constexpr (F == MathFn::kSin) return math::sin(a);
  if constexpr (F == MathFn::kCos) return math::cos(a);
  if constexpr (F == MathFn::kPow) return math::pow(a, b);
  (void)b;
}
#endif

// t[i] = F(t[i]) (pow: t[i] ^ u[i]) for i < m; u is read for pow only.
template <MathFn F, typename T>
void apply_math(T* t, const T* u, int64_t m) {
#if defined(SG_NO_VECTOR_MATH)
  for (int64_t i = 0; i < m; ++i) t[i] = s_call<F>(t[i], F == MathFn::kPow ? u[i] : T(0));
#else
  if (math::fma_flavour()) {
    apply_vectors<F, true>(t, u, m);
  } else {
    apply_vectors<F, false>(t, u, m);
  }
#endif
}

}  // namespace
}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_VECTOR_MATH_H_

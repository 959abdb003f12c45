// Internal to the per-level loops (kernels/host/loops_elementwise.cc): the transcendental
// functions of kernels/functors/math_fns.h over a block of contiguous elements, in the
// vector width of the level being compiled (SG_CPU_LEVEL_*): SLEEF's deterministic no-FMA
// functions, 4/2 lanes (float/double) on the baseline level, 8/4 on avx2 (SLEEF's AVX
// build; it needs no FMA), 16/8 on avx512. SLEEF defines these to give the scalar
// function's bits at every width, so a block's result does not depend on where a thread's
// range starts or how long it is. The tail of a block runs in a full vector of copies.
// NaN results become the positive quiet NaN, as math_fns.h's scalar functions make them.
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

#if defined(SG_CPU_LEVEL_AVX512)
using VecF = __m512;
using VecD = __m512d;
#define SG_VMF(fn) Sleef_cinz_##fn##f16_u10avx512fnofma
#define SG_VMD(fn) Sleef_cinz_##fn##d8_u10avx512fnofma
SG_INLINE VecF v_load(const float* p) { return _mm512_loadu_ps(p); }
SG_INLINE VecD v_load(const double* p) { return _mm512_loadu_pd(p); }
SG_INLINE void v_store(float* p, VecF v) { _mm512_storeu_ps(p, v); }
SG_INLINE void v_store(double* p, VecD v) { _mm512_storeu_pd(p, v); }
#elif defined(SG_CPU_LEVEL_AVX2)
using VecF = __m256;
using VecD = __m256d;
#define SG_VMF(fn) Sleef_cinz_##fn##f8_u10avx
#define SG_VMD(fn) Sleef_cinz_##fn##d4_u10avx
SG_INLINE VecF v_load(const float* p) { return _mm256_loadu_ps(p); }
SG_INLINE VecD v_load(const double* p) { return _mm256_loadu_pd(p); }
SG_INLINE void v_store(float* p, VecF v) { _mm256_storeu_ps(p, v); }
SG_INLINE void v_store(double* p, VecD v) { _mm256_storeu_pd(p, v); }
#elif defined(__SSE2__)
using VecF = __m128;
using VecD = __m128d;
#define SG_VMF(fn) Sleef_cinz_##fn##f4_u10sse2
#define SG_VMD(fn) Sleef_cinz_##fn##d2_u10sse2
SG_INLINE VecF v_load(const float* p) { return _mm_loadu_ps(p); }
SG_INLINE VecD v_load(const double* p) { return _mm_loadu_pd(p); }
SG_INLINE void v_store(float* p, VecF v) { _mm_storeu_ps(p, v); }
SG_INLINE void v_store(double* p, VecD v) { _mm_storeu_pd(p, v); }
#else
#define SG_NO_VECTOR_MATH 1
#endif

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

#define SG_VM_FN(fn)                                                  \
  SG_INLINE VecF v_##fn(VecF v) { return SG_VMF(fn)(v); }             \
  SG_INLINE VecD v_##fn(VecD v) { return SG_VMD(fn)(v); }
SG_VM_FN(exp)
SG_VM_FN(log)
SG_VM_FN(log1p)
SG_VM_FN(tanh)
SG_VM_FN(erf)
SG_VM_FN(sin)
SG_VM_FN(cos)
#undef SG_VM_FN
SG_INLINE VecF v_pow(VecF a, VecF b) { return SG_VMF(pow)(a, b); }
SG_INLINE VecD v_pow(VecD a, VecD b) { return SG_VMD(pow)(a, b); }
#undef SG_VMF
#undef SG_VMD

// The function F of one vector (pow: a ^ b; the others ignore b).
template <MathFn F, typename V>
SG_INLINE V v_call(V a, V b) {
  if constexpr (F == MathFn::kExp) return v_exp(a);
  if constexpr (F == MathFn::kLog) return v_log(a);
  if constexpr (F == MathFn::kLog1p) return v_log1p(a);
  if constexpr (F == MathFn::kTanh) return v_tanh(a);
  if constexpr (F == MathFn::kErf) return v_erf(a);
  if constexpr (F == MathFn::kSin) return v_sin(a);
  if constexpr (F == MathFn::kCos) return v_cos(a);
  if constexpr (F == MathFn::kPow) return v_pow(a, b);
  (void)b;
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
#if !defined(SG_NO_VECTOR_MATH)
  using V = typename VecOf<T>::V;
  constexpr int kLanes = VecOf<T>::kLanes;
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    const V b = F == MathFn::kPow ? v_load(u + i) : V{};
    v_store(t + i, v_call<F>(v_load(t + i), b));
  }
  if (i < m) {
    // The tail in a full vector: the lanes past m hold copies of t[i] (any value would
    // do: lanes do not mix).
    T a[kLanes], b[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      a[j] = t[i + (i + j < m ? j : 0)];
      b[j] = F == MathFn::kPow ? u[i + (i + j < m ? j : 0)] : T(0);
    }
    v_store(a, v_call<F>(v_load(a), v_load(b)));
    for (int64_t j = 0; i + j < m; ++j) t[i + j] = a[j];
  }
#else
  for (int64_t i = 0; i < m; ++i) t[i] = s_call<F>(t[i], F == MathFn::kPow ? u[i] : T(0));
#endif
  for (int64_t i = 0; i < m; ++i) t[i] = math::quiet_nan_if_nan(t[i]);
}

}  // namespace
}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_VECTOR_MATH_H_

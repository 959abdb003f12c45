// The scalar transcendental functions of the per-element functors (`math::exp`, ...) and
// the names (`MathFn`) by which the cpu loops pick the vector form of the same function
// (kernels/host/vector_math.h).
//
// Host: SLEEF's deterministic 1-ulp functions, which give the bits of their vector forms at
// every width (SLEEF states it; levels_test checks it), with every NaN result made the
// positive quiet NaN (the scalar and vector code disagree on its sign). They come in two
// flavours: with FMA ("finz", about 1.6x faster) where the machine has AVX2 and FMA, else
// without ("cinz"). The flavour is the machine's, not the level's: every level in a
// process (the baseline one too, through SLEEF's 128-bit AVX2 build) gives the same bits,
// and a machine without FMA gives other last bits than one with it, unless
// STREAMGRAD_CPU_MATH=portable asks every machine for the functions without FMA.
// Device code (nvcc's device pass): CUDA's functions. nvcc's host pass never runs the
// functors, and gets the C library so that it need not parse sleef.h.
// Functions without rounding questions (sqrt, fabs, fma: IEEE rounds it once) are the C
// library's everywhere.
//
// Thread-safety: pure functions. Failure: none; IEEE rules for NaN and infinities.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_MATH_FNS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_MATH_FNS_H_

#include <math.h>

#include "runtime/base/host_device.h"

#if !defined(__CUDACC__)
#include <sleef.h>
#define SG_MATH_SLEEF 1
// sleef.h declares the scalar FMA functions only to code compiled for FMA (under its
// FP_FAST_FMA); they are chosen at run time here, and called only on machines that have it.
#if !defined(FP_FAST_FMA)
extern "C" {
#define SG_SLEEF_FMA_DECL(fn)                     \
  float Sleef_finz_##fn##f1_u10purecfma(float);   \
  double Sleef_finz_##fn##d1_u10purecfma(double);
SG_SLEEF_FMA_DECL(exp)
SG_SLEEF_FMA_DECL(log)
SG_SLEEF_FMA_DECL(log1p)
SG_SLEEF_FMA_DECL(tanh)
SG_SLEEF_FMA_DECL(erf)
SG_SLEEF_FMA_DECL(sin)
SG_SLEEF_FMA_DECL(cos)
#undef SG_SLEEF_FMA_DECL
float Sleef_finz_powf1_u10purecfma(float, float);
double Sleef_finz_powd1_u10purecfma(double, double);
}
#endif
#endif

namespace streamgrad {
namespace kernels {

// The functions the loops vectorise; kNone: a functor without one.
enum class MathFn { kNone, kExp, kLog, kLog1p, kTanh, kErf, kSin, kCos, kPow };

namespace math {

// C functions rather than std:: overloads: the std:: ones are inline functions that a
// non-optimised build would emit once per level (see SG_INLINE in host_device.h).
SG_HOST_DEVICE SG_INLINE float sqrt(float x) { return ::sqrtf(x); }
SG_HOST_DEVICE SG_INLINE double sqrt(double x) { return ::sqrt(x); }
SG_HOST_DEVICE SG_INLINE float abs(float x) { return ::fabsf(x); }
SG_HOST_DEVICE SG_INLINE double abs(double x) { return ::fabs(x); }
// a * b + c rounded once: one instruction where the level has FMA, else the C library's
// exact emulation, so the bits are the same either way.
SG_HOST_DEVICE SG_INLINE float fma(float a, float b, float c) { return ::fmaf(a, b, c); }

#if defined(SG_MATH_SLEEF)
// Whether this process's transcendental functions are SLEEF's FMA ones (math_fns.cc):
// x86-64 with AVX2 and FMA, and STREAMGRAD_CPU_MATH unset. Decided at the first call;
// ValueError (at every call) for another value of the variable than "portable".
bool fma_flavour();
#endif

// The one NaN a host transcendental returns.
template <typename T>
SG_HOST_DEVICE SG_INLINE T quiet_nan_if_nan(T r) {
  return r != r ? static_cast<T>(NAN) : r;
}

#if defined(SG_MATH_SLEEF)
#define SG_MATH_FN1(name, cf, cd)                                                       \
  SG_INLINE float name(float x) {                                                        \
    return quiet_nan_if_nan(fma_flavour() ? Sleef_finz_##cf##1_u10purecfma(x)             \
                                          : Sleef_cinz_##cf##1_u10purec(x));              \
  }                                                                                      \
  SG_INLINE double name(double x) {                                                      \
    return quiet_nan_if_nan(fma_flavour() ? Sleef_finz_##cd##1_u10purecfma(x)             \
                                          : Sleef_cinz_##cd##1_u10purec(x));              \
  }
SG_MATH_FN1(exp, expf, expd)
SG_MATH_FN1(log, logf, logd)
SG_MATH_FN1(log1p, log1pf, log1pd)
SG_MATH_FN1(tanh, tanhf, tanhd)
SG_MATH_FN1(erf, erff, erfd)
SG_MATH_FN1(sin, sinf, sind)
SG_MATH_FN1(cos, cosf, cosd)
#undef SG_MATH_FN1
SG_INLINE float pow(float x, float y) {
  return quiet_nan_if_nan(fma_flavour() ? Sleef_finz_powf1_u10purecfma(x, y)
                                        : Sleef_cinz_powf1_u10purec(x, y));
}
SG_INLINE double pow(double x, double y) {
  return quiet_nan_if_nan(fma_flavour() ? Sleef_finz_powd1_u10purecfma(x, y)
                                        : Sleef_cinz_powd1_u10purec(x, y));
}
#else
#define SG_MATH_FN1(name, cf, cd)                                  \
  SG_HOST_DEVICE SG_INLINE float name(float x) { return ::cf(x); } \
  SG_HOST_DEVICE SG_INLINE double name(double x) { return ::cd(x); }
SG_MATH_FN1(exp, expf, exp)
SG_MATH_FN1(log, logf, log)
SG_MATH_FN1(log1p, log1pf, log1p)
SG_MATH_FN1(tanh, tanhf, tanh)
SG_MATH_FN1(erf, erff, erf)
SG_MATH_FN1(sin, sinf, sin)
SG_MATH_FN1(cos, cosf, cos)
#undef SG_MATH_FN1
SG_HOST_DEVICE SG_INLINE float pow(float x, float y) { return ::powf(x, y); }
SG_HOST_DEVICE SG_INLINE double pow(double x, double y) { return ::pow(x, y); }
#endif

}  // namespace math
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_MATH_FNS_H_

// GELU's normal CDF Phi(x) and density in float32 without erf, for the gelu functors
// (activation_ops.h): one exp, one division and a polynomial serve both the forward and
// the backward, where SLEEF's 1-ulp erff cost five times an exp and made the exact GELU's
// backward 1.8x libtorch's per element.
//
// With z = |x| / sqrt(2) and t = 1 / (1 + 0.3 z),
//   erfc(z) = t exp(-x^2 / 2) R(t),   Phi(x) = erfc(z) / 2 (x < 0), 1 - erfc(z) / 2 (x >= 0),
// R a degree-10 polynomial in t - 0.5 fitted by Chebyshev interpolation to
// erfc(z) exp(z^2) / t for z in [0, 12] (relative error 1.7e-8 with its coefficients
// rounded to float). exp(-x^2 / 2), also the density's, takes -x^2 / 2 exactly: x * x
// rounded, times 1/2, and the rounding's low part (by fma) multiplied back in; without it
// x * x's rounding alone would cost 2 ulp at x = -2 and 140 at x = -12. GELU from it is
// within 7 ulp of the correctly rounded value for x >= -8 and 12 below, where values
// near float's smallest normal numbers, its derivative too (tests/kernels/elementwise_test
// measures both against double precision); 1 + erf(x / sqrt(2)) in float loses every bit
// below x = -4.
//
// The exp is this file's own (exp_gauss), not SLEEF's: its argument is never positive and
// never below -128, so range reduction, a degree-7 polynomial and two exact scalings by
// powers of two do, inline. The functors are then one expression that the compiler
// vectorises in a single pass over the row, where SLEEF's exp was a call over a buffer
// between two more passes (over 262,144 floats on one thread of this machine: forward
// 0.17 -> 0.14 ms, forward and backward 0.47 -> 0.30 ms; bench/RESULTS.md).
//
// Only arithmetic, fma (which IEEE rounds once), conversions between float and integers
// and bit patterns: the scalar form (strided rows, cuda) and the vector loops give the
// same bits at every level, FMA or not.
//
// Thread-safety: pure functions. Failure: none; the helpers take NaN as -16 (its magnitude
// clamped, its sign test false) and the functors keep it through their own x, so GELU is
// NaN in, NaN out; Phi(-inf) = 0, Phi(inf) = 1.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_GELU_FLOAT_H_
#define STREAMGRAD_KERNELS_FUNCTORS_GELU_FLOAT_H_

#include <stdint.h>

#include "kernels/functors/math_fns.h"
#include "runtime/base/half.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {
namespace gelu_float {

// |x| limited to 16: beyond, Phi is 0 or 1 in float and the density 0, and x * x would
// overflow (making fma's low part NaN). Everything below but Phi's final choice of side
// needs only |x|. Taken on the bit pattern: with the sign bit cleared, floats order as
// their patterns do, and NaN's patterns lie above 16's, so NaN becomes 16 (the functors
// multiply by the x they were given, which keeps it NaN). One integer minimum per vector;
// the float clamp to [-16, 16] it replaces was, at the avx2 level, a web of comparisons
// and blends that GCC pushed into both sides of every later selection (the GELU forward
// 0.39 -> 0.32 ms over 262,144 floats; the values are the same).
SG_HOST_DEVICE SG_INLINE float clamped_abs(float x) {
  const uint32_t a = half_internal::float_bits(x) & 0x7fffffffu;
  constexpr uint32_t kSixteen = 0x41800000u;
  return half_internal::bits_float(a < kSixteen ? a : kSixteen);
}

// The exp's argument: -x^2 / 2 as rounded.
SG_HOST_DEVICE SG_INLINE float gauss_arg(float x_in) {
  const float x = clamped_abs(x_in);
  return -0.5f * (x * x);
}

// exp(a) for a in [-128, 0], gauss_arg's range (never NaN: see clamped_abs). a = n ln 2 + r
// with n an integer and |r| <= ln 2 / 2; exp(r) by its Taylor series to degree 7 (the
// truncation is below a tenth of an ulp); then 2^n as two normal powers of two, since 2^n
// alone is subnormal below n = -126: the first product is exact and the second rounds
// once, so a result in float's subnormal range loses only that rounding.
SG_HOST_DEVICE SG_INLINE float exp_gauss(float a) {
  // Adding 1.5 * 2^23 rounds to an integer: fma rounds a log2(e) + 1.5 * 2^23 once.
  constexpr float kShift = 12582912.0f;
  const float n = math::fma(a, 1.44269504f, kShift) - kShift;
  // a - n ln 2 with ln 2 as the sum of two floats, the first with trailing zero bits.
  float r = math::fma(n, -0.693145752f, a);
  r = math::fma(n, -1.42860677e-6f, r);
  float p = 1.98412698e-4f;
  p = math::fma(p, r, 1.38888889e-3f);
  p = math::fma(p, r, 8.33333333e-3f);
  p = math::fma(p, r, 4.16666667e-2f);
  p = math::fma(p, r, 1.66666667e-1f);
  p = math::fma(p, r, 0.5f);
  p = math::fma(p, r, 1.0f);
  p = math::fma(p, r, 1.0f);
  const int32_t k = static_cast<int32_t>(n);  // in [-185, 0]
  // Floor of k / 2 (an arithmetic shift: one instruction, where k / 2 rounds toward zero
  // in three); either split gives the same product, the first scaling being exact.
  const int32_t half = k >> 1;
  const float s1 = half_internal::bits_float(static_cast<uint32_t>(half + 127) << 23);
  const float s2 = half_internal::bits_float(static_cast<uint32_t>(k - half + 127) << 23);
  return (p * s1) * s2;
}

// exp(-x^2 / 2) from e = exp(gauss_arg(x)), x * x's rounding multiplied back in.
SG_HOST_DEVICE SG_INLINE float gauss(float x_in, float e) {
  const float x = clamped_abs(x_in);
  const float sq = x * x;
  return math::fma(e, -0.5f * math::fma(x, x, -sq), e);
}

// Phi(x) from g = gauss(x, e).
SG_HOST_DEVICE SG_INLINE float cdf(float x_in, float g) {
  const float z = clamped_abs(x_in) * 0.707106781f;
  const float t = 1.0f / (1.0f + 0.3f * z);
  const float u = t - 0.5f;
  float p = 0.0553310551f;
  p = math::fma(p, u, -0.0532543547f);
  p = math::fma(p, u, -0.127270833f);
  p = math::fma(p, u, -0.022688454f);
  p = math::fma(p, u, 0.279032797f);
  p = math::fma(p, u, 0.652792454f);
  p = math::fma(p, u, 0.911380768f);
  p = math::fma(p, u, 0.949750841f);
  p = math::fma(p, u, 0.795124352f);
  p = math::fma(p, u, 0.553047121f);
  p = math::fma(p, u, 0.324979931f);
  const float r = (t * g) * p;  // erfc(z)
  return x_in >= 0 ? 1.0f - 0.5f * r : 0.5f * r;
}

}  // namespace gelu_float
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_GELU_FLOAT_H_

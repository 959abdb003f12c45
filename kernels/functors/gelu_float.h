// GELU's normal CDF Phi(x) in float32 without erf, for the gelu functors
// (activation_ops.h): one exp, one division and a polynomial, where SLEEF's 1-ulp erff
// cost five times an exp and made the exact GELU's backward 1.8x libtorch's per element.
//
// Phi(x) = erfc(z) / 2 for x < 0 and 1 - erfc(z) / 2 for x >= 0, z = |x| / sqrt(2), with
//   erfc(z) = t exp(-z^2 + P(t)),  t = 1 / (1 + 0.46 z),
// P a degree-9 polynomial in t - 0.6, fitted by Chebyshev interpolation to
// log(erfc(z) / t) + z^2 for z in [0, 10] (largest error 2.3e-8; 3.4e-8 with the
// coefficients rounded to float). The exponent -z^2 = -x^2 / 2 is carried as a rounded
// sum and its error (x^2's low part by fma, the sum's by TwoSum), which multiplies the
// exp back in: without it the rounding of x^2 alone costs 2 ulp at x = -2 and 140 at
// x = -12. GELU from it is within 5 ulp of the correctly rounded value for x >= -8 and
// within 13 below (tests/ops/math_test.cc measures it against double precision), where
// 1 + erf(x / sqrt(2)) in float loses every bit below x = -4.
//
// Only arithmetic and fma, which IEEE rounds exactly: the scalar form (strided rows,
// cuda) and the vector loops give the same bits at every level (exp aside, which is
// SLEEF's, scalar and vector alike on the host).
//
// Thread-safety: pure functions. Failure: none; NaN in, NaN out; Phi(-inf) = 0,
// Phi(inf) = 1.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_GELU_FLOAT_H_
#define STREAMGRAD_KERNELS_FUNCTORS_GELU_FLOAT_H_

#include "kernels/functors/math_fns.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {
namespace gelu_float {

// x limited to [-16, 16], NaN kept: beyond, Phi is 0 or 1 in float and gauss 0, and x * x
// would overflow (making fma's low part NaN).
SG_HOST_DEVICE SG_INLINE float clamped(float x) { return x > 16.0f ? 16.0f : (x < -16.0f ? -16.0f : x); }

struct Exponent {
  float t;   // 1 / (1 + 0.46 z)
  float hi;  // -z^2 + P(t), rounded: the exp's argument
  float lo;  // what the rounding of hi left out (|lo| a few ulp of hi)
};

SG_HOST_DEVICE SG_INLINE Exponent exponent(float x_in) {
  const float x = clamped(x_in);
  const float z = math::abs(x) * 0.707106781f;
  const float t = 1.0f / (1.0f + 0.46f * z);
  const float u = t - 0.6f;
  float p = 0.193176866f;
  p = math::fma(p, u, -0.0176769458f);
  p = math::fma(p, u, -0.266561508f);
  p = math::fma(p, u, 0.0791911557f);
  p = math::fma(p, u, 0.287348539f);
  p = math::fma(p, u, -0.146811783f);
  p = math::fma(p, u, -0.39915663f);
  p = math::fma(p, u, 0.218095705f);
  p = math::fma(p, u, 1.47279513f);
  p = math::fma(p, u, -0.597578049f);
  const float sq = x * x;
  const float sq_lo = math::fma(x, x, -sq);
  const float a = -0.5f * sq;  // exact: halving a normal number
  const float s = a + p;
  const float pb = s - a, pa = s - pb;  // TwoSum of a and p
  const float err = (a - pa) + (p - pb);
  return Exponent{t, s, err - 0.5f * sq_lo};
}

// Phi(x) from e = exp(exponent(x).hi).
SG_HOST_DEVICE SG_INLINE float cdf(float x, float e) {
  const Exponent ex = exponent(x);
  float r = ex.t * e;
  r = math::fma(r, ex.lo, r);  // r * exp(lo), |lo| tiny
  return x >= 0 ? 1.0f - 0.5f * r : 0.5f * r;
}

// exp's argument for gauss.
SG_HOST_DEVICE SG_INLINE float gauss_arg(float x_in) {
  const float x = clamped(x_in);
  return -0.5f * (x * x);
}

// exp(-x^2 / 2) from e2 = exp(gauss_arg(x)), correcting x * x's rounding as cdf does.
SG_HOST_DEVICE SG_INLINE float gauss(float x_in, float e2) {
  const float x = clamped(x_in);
  const float sq = x * x;
  return math::fma(e2, -0.5f * math::fma(x, x, -sq), e2);
}

}  // namespace gelu_float
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_GELU_FLOAT_H_

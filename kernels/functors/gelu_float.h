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
// Only arithmetic and fma, which IEEE rounds exactly, around the exp: the scalar form
// (strided rows, cuda) and the vector loops give the same bits at every level.
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

// x limited to [-16, 16], NaN kept: beyond, Phi is 0 or 1 in float and the density 0, and
// x * x would overflow (making fma's low part NaN).
SG_HOST_DEVICE SG_INLINE float clamped(float x) {
  return x > 16.0f ? 16.0f : (x < -16.0f ? -16.0f : x);
}

// The exp's argument: -x^2 / 2 as rounded.
SG_HOST_DEVICE SG_INLINE float gauss_arg(float x_in) {
  const float x = clamped(x_in);
  return -0.5f * (x * x);
}

// exp(-x^2 / 2) from e = exp(gauss_arg(x)), x * x's rounding multiplied back in.
SG_HOST_DEVICE SG_INLINE float gauss(float x_in, float e) {
  const float x = clamped(x_in);
  const float sq = x * x;
  return math::fma(e, -0.5f * math::fma(x, x, -sq), e);
}

// Phi(x) from g = gauss(x, e).
SG_HOST_DEVICE SG_INLINE float cdf(float x_in, float g) {
  const float x = clamped(x_in);
  const float z = math::abs(x) * 0.707106781f;
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
  return x >= 0 ? 1.0f - 0.5f * r : 0.5f * r;
}

}  // namespace gelu_float
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_GELU_FLOAT_H_

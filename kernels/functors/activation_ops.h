// The per-element math of the activations that call a transcendental function (sigmoid,
// silu, gelu and gelu's tanh form) and of their backwards, in the split form
// elementwise_ops.h describes (kFn, arg, finish), so that the cpu loops run the function
// as SLEEF's vector function; included by elementwise_ops.h, which maps op codes to them.
//
// Thread-safety: stateless values. Failure: none; IEEE rules for NaN/inf, every NaN the
// positive quiet NaN.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_ACTIVATION_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_ACTIVATION_OPS_H_

#include "kernels/functors/gelu_float.h"
#include "kernels/functors/math_fns.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {

// The logistic function from t = exp(-|x|), in the branch where exp cannot overflow:
// 1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below. One division of a selected
// numerator: GCC does not vectorise a choice between two divisions (it will not run a
// division the scalar code would have skipped).
template <typename T>
SG_HOST_DEVICE SG_INLINE T logistic_from(T x, T t) {
  return (x >= 0 ? T(1) : t) / (T(1) + t);
}
struct SqrtOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return math::sqrt(x); }
};
struct SigmoidOp {
  static constexpr MathFn kFn = MathFn::kExp;
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg(T x) const { return -math::abs(x); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T finish(T x, T t, T) const { return logistic_from(x, t); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const {
    return math::quiet_nan_if_nan(finish(x, math::exp(arg(x)), T(0)));
  }
};
// x * sigmoid(x).
struct SiluOp {
  static constexpr MathFn kFn = MathFn::kExp;
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg(T x) const { return -math::abs(x); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T finish(T x, T t, T) const { return x * logistic_from(x, t); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const {
    return math::quiet_nan_if_nan(finish(x, math::exp(arg(x)), T(0)));
  }
};

// GELU's constants: 1/sqrt(2), 1/sqrt(2 pi), and the tanh form's sqrt(2/pi) and 0.044715.
constexpr double kGeluAlpha = 0.70710678118654752440;
constexpr double kGeluPdf = 0.39894228040143267794;
constexpr double kGeluBeta = 0.79788456080286535588;
constexpr double kGeluKappa = 0.044715;

// x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2))); in float (16-bit types too, widened) Phi
// comes from gelu_float.h's own exp instead, inline: no split form for float
// (kFnFloat kNone), so the loops run the whole functor in one vectorised pass.
struct GeluOp {
  static constexpr MathFn kFn = MathFn::kErf;
  static constexpr MathFn kFnFloat = MathFn::kNone;
  SG_HOST_DEVICE SG_INLINE double arg(double x) const { return x * kGeluAlpha; }
  SG_HOST_DEVICE SG_INLINE double finish(double x, double t, double) const {
    return x * 0.5 * (1 + t);
  }
  SG_HOST_DEVICE SG_INLINE float operator()(float x) const {
    const float e = gelu_float::exp_gauss(gelu_float::gauss_arg(x));
    return math::quiet_nan_if_nan(x * gelu_float::cdf(x, gelu_float::gauss(x, e)));
  }
  SG_HOST_DEVICE SG_INLINE double operator()(double x) const {
    return math::quiet_nan_if_nan(finish(x, math::erf(arg(x)), 0.0));
  }
};
// x / 2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
struct GeluTanhOp {
  static constexpr MathFn kFn = MathFn::kTanh;
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg(T x) const {
    return T(kGeluBeta) * (x + T(kGeluKappa) * (x * x * x));
  }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T finish(T x, T t, T) const { return x * T(0.5) * (T(1) + t); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const {
    return math::quiet_nan_if_nan(finish(x, math::tanh(arg(x)), T(0)));
  }
};
// g * d/dx gelu(x) = g * (Phi(x) + x phi(x)): erf for Phi, exp (the second function) for
// phi; in float one inline exp serves both (gelu_float.h), without a split form.
struct GeluBackwardOp {
  static constexpr MathFn kFn = MathFn::kErf;
  static constexpr MathFn kFnFloat = MathFn::kNone;
  static constexpr MathFn kFn2 = MathFn::kExp;
  SG_HOST_DEVICE SG_INLINE double arg(double, double x) const { return x * kGeluAlpha; }
  SG_HOST_DEVICE SG_INLINE double arg2(double, double x) const { return -0.5 * x * x; }
  SG_HOST_DEVICE SG_INLINE double finish(double g, double x, double t, double u) const {
    return g * (0.5 * (1 + t) + x * (u * kGeluPdf));
  }
  SG_HOST_DEVICE SG_INLINE float operator()(float g, float x) const {
    const float gs = gelu_float::gauss(x, gelu_float::exp_gauss(gelu_float::gauss_arg(x)));
    return math::quiet_nan_if_nan(
        g * (gelu_float::cdf(x, gs) + x * (gs * static_cast<float>(kGeluPdf))));
  }
  SG_HOST_DEVICE SG_INLINE double operator()(double g, double x) const {
    return math::quiet_nan_if_nan(finish(g, x, math::erf(arg(g, x)), math::exp(arg2(g, x))));
  }
};
// g * d/dx of the tanh form, t = tanh(sqrt(2/pi) (x + k x^3)):
// (1 + t) / 2 + x / 2 (1 - t^2) sqrt(2/pi) (1 + 3 k x^2).
struct GeluTanhBackwardOp {
  static constexpr MathFn kFn = MathFn::kTanh;
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg(T, T x) const {
    return T(kGeluBeta) * (x + T(kGeluKappa) * (x * x * x));
  }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T finish(T g, T x, T t, T) const {
    const T left = T(0.5) * (T(1) + t);
    const T right = T(0.5) * x * (T(1) - t * t) * T(kGeluBeta) *
                    (T(1) + T(3 * kGeluKappa) * (x * x));
    return g * (left + right);
  }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T g, T x) const {
    return math::quiet_nan_if_nan(finish(g, x, math::tanh(arg(g, x)), T(0)));
  }
};
// g * s (1 + x (1 - s)), s = sigmoid(x).
struct SiluBackwardOp {
  static constexpr MathFn kFn = MathFn::kExp;
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg(T, T x) const { return -math::abs(x); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T finish(T g, T x, T t, T) const {
    const T s = logistic_from(x, t);
    return g * (s * (T(1) + x * (T(1) - s)));
  }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T g, T x) const {
    return math::quiet_nan_if_nan(finish(g, x, math::exp(arg(g, x)), T(0)));
  }
};

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_ACTIVATION_OPS_H_

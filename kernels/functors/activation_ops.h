// The per-element math of the activations that call a transcendental function (sigmoid,
// silu, gelu and gelu's tanh form) and of their backwards, in the split form
// elementwise_ops.h describes (kFn, arg, finish), so that the cpu loops run the function
// as SLEEF's vector function; included by elementwise_ops.h, which maps op codes to them.
//
// Thread-safety: stateless values. Failure: none; IEEE rules for NaN/inf, every NaN the
// positive quiet NaN.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_ACTIVATION_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_ACTIVATION_OPS_H_

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

// x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2))).
struct GeluOp {
  static constexpr MathFn kFn = MathFn::kErf;
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg(T x) const { return x * T(kGeluAlpha); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T finish(T x, T t, T) const { return x * T(0.5) * (T(1) + t); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const {
    return math::quiet_nan_if_nan(finish(x, math::erf(arg(x)), T(0)));
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
// g * d/dx gelu(x) = g * (Phi(x) + x phi(x)): erf for Phi, exp (the second function) for phi.
struct GeluBackwardOp {
  static constexpr MathFn kFn = MathFn::kErf;
  static constexpr MathFn kFn2 = MathFn::kExp;
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg(T, T x) const { return x * T(kGeluAlpha); }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg2(T, T x) const { return T(-0.5) * x * x; }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T finish(T g, T x, T t, T u) const {
    const T cdf = T(0.5) * (T(1) + t);
    const T pdf = u * T(kGeluPdf);
    return g * (cdf + x * pdf);
  }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T g, T x) const {
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

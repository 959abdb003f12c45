// The per-element math of the element-wise kernels (unary, unary_scalar, binary and axpy in
// kernels.h) as SG_HOST_DEVICE functors: the cpu loops (kernels/host/loops_elementwise.cc,
// compiled once per instruction-set level) and the cuda kernels (kernels/cuda) call them
// (with_unary, with_unary_scalar and with_binary map an op code to its functor for both),
// so that every device and level computes each element alike.
//
// Every functor is one IEEE expression on its operands. Transcendental functions go
// through `math::` to the C library's scalar function (expf, tanh, ...) on every level and
// never to a vector approximation, so an AVX-512 loop and the baseline loop round alike;
// the loops are compiled without FMA contraction for the same reason.
// Functors with a scalar hold it already rounded to the element type (a float32 tensor op
// uses a float32 scalar, as in PyTorch).
//
// Thread-safety: stateless values (or a scalar). Failure: none; IEEE rules for NaN/inf.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_ELEMENTWISE_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_ELEMENTWISE_OPS_H_

#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "kernels/op_codes.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {
namespace math {

// C functions rather than std:: overloads: the std:: ones are inline functions that a
// non-optimised build would emit once per level (see SG_INLINE in host_device.h).
SG_HOST_DEVICE SG_INLINE float exp(float x) { return ::expf(x); }
SG_HOST_DEVICE SG_INLINE double exp(double x) { return ::exp(x); }
SG_HOST_DEVICE SG_INLINE float log(float x) { return ::logf(x); }
SG_HOST_DEVICE SG_INLINE double log(double x) { return ::log(x); }
SG_HOST_DEVICE SG_INLINE float sqrt(float x) { return ::sqrtf(x); }
SG_HOST_DEVICE SG_INLINE double sqrt(double x) { return ::sqrt(x); }
SG_HOST_DEVICE SG_INLINE float tanh(float x) { return ::tanhf(x); }
SG_HOST_DEVICE SG_INLINE double tanh(double x) { return ::tanh(x); }
SG_HOST_DEVICE SG_INLINE float pow(float x, float y) { return ::powf(x, y); }
SG_HOST_DEVICE SG_INLINE double pow(double x, double y) { return ::pow(x, y); }
SG_HOST_DEVICE SG_INLINE float abs(float x) { return ::fabsf(x); }
SG_HOST_DEVICE SG_INLINE double abs(double x) { return ::fabs(x); }

}  // namespace math

// ---- unary: y = f(x) ----
struct NegOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return -x; }
};
struct ExpOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return math::exp(x); }
};
struct LogOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return math::log(x); }
};
struct SqrtOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return math::sqrt(x); }
};
struct TanhOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return math::tanh(x); }
};
struct SigmoidOp {
  // Two branches so that exp never overflows to inf / inf.
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const {
    if (x >= 0) return T(1) / (T(1) + math::exp(-x));
    const T e = math::exp(x);
    return e / (T(1) + e);
  }
};
struct ReluOp {
  // Written so that NaN propagates (NaN < 0 is false).
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return x < 0 ? T(0) : x; }
};
struct AbsOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return math::abs(x); }
};
struct SignOp {
  // -1, 0 or 1, keeping the sign of zero; NaN * 0 keeps NaN.
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const {
    return x > 0 ? T(1) : x < 0 ? T(-1) : x * T(0);
  }
};
struct ReciprocalOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return T(1) / x; }
};
struct SquareOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return x * x; }
};

// ---- unary with a scalar: y = f(x, s) ----
template <typename T>
struct AddScalarOp {
  T s;
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return x + s; }
};
template <typename T>
struct MulScalarOp {
  T s;
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return x * s; }
};
// x ^ 2 is dispatched to SquareOp: one rounding, as x * x.
template <typename T>
struct PowScalarOp {
  T s;
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return math::pow(x, s); }
};
template <typename T>
struct RSubScalarOp {
  T s;
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return s - x; }
};
template <typename T>
struct RDivScalarOp {
  T s;
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return s / x; }
};
template <typename T>
struct GeScalarOp {
  T s;  // NaN >= s is false: 0
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return x >= s ? T(1) : T(0); }
};

// ---- binary: y = f(a, b) ----
struct AddOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T a, T b) const { return a + b; }
};
struct SubOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T a, T b) const { return a - b; }
};
struct MulOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T a, T b) const { return a * b; }
};
struct DivOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T a, T b) const { return a / b; }
};
struct PowOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T a, T b) const { return math::pow(a, b); }
};
// g * (x > 0), but 0 where x <= 0 even for an infinite or NaN g.
struct ReluBackwardOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T g, T x) const { return x > 0 ? g : T(0); }
};
// g * (1 - y * y), y the tanh output.
struct TanhBackwardOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T g, T y) const { return g * (T(1) - y * y); }
};
// g * y * (1 - y), y the sigmoid output.
struct SigmoidBackwardOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T g, T y) const { return g * y * (T(1) - y); }
};
// a + alpha * b: two roundings (no fused multiply-add), as every level computes it.
template <typename T>
struct AxpyOp {
  T alpha;
  SG_HOST_DEVICE SG_INLINE T operator()(T a, T b) const { return a + alpha * b; }
};

// arange's element i (row-major): start + i * step, exactly in int64 for int64 (callers
// check that start and step are integers in range), else in double, then rounded to T.
template <typename T>
struct ArangeOp {
  double start, step;
  SG_HOST_DEVICE SG_INLINE T operator()(uint64_t i) const {
    if constexpr (std::is_integral<T>::value) {
      return static_cast<int64_t>(start) + static_cast<int64_t>(i) * static_cast<int64_t>(step);
    } else {
      return static_cast<T>(start + static_cast<double>(i) * step);
    }
  }
};

// ---- op code to functor: fn(functor) with the functor of `op`, so that every device
// maps a code to the same math (the cpu levels and kernels/cuda call these). Host code:
// the switch runs once per launch, fn is instantiated once per functor.
template <typename Fn>
SG_INLINE void with_unary(Unary op, Fn&& fn) {
  switch (op) {
    case Unary::kNeg: return fn(NegOp{});
    case Unary::kExp: return fn(ExpOp{});
    case Unary::kLog: return fn(LogOp{});
    case Unary::kSqrt: return fn(SqrtOp{});
    case Unary::kTanh: return fn(TanhOp{});
    case Unary::kSigmoid: return fn(SigmoidOp{});
    case Unary::kRelu: return fn(ReluOp{});
    case Unary::kAbs: return fn(AbsOp{});
    case Unary::kSign: return fn(SignOp{});
    case Unary::kReciprocal: return fn(ReciprocalOp{});
    case Unary::kSquare: return fn(SquareOp{});
  }
}

// s is already rounded to T. x ^ 2 is x * x (as PyTorch computes it), not a pow call.
template <typename T, typename Fn>
SG_INLINE void with_unary_scalar(UnaryScalar op, T s, Fn&& fn) {
  switch (op) {
    case UnaryScalar::kAdd: return fn(AddScalarOp<T>{s});
    case UnaryScalar::kMul: return fn(MulScalarOp<T>{s});
    case UnaryScalar::kPow:
      if (s == T(2)) return fn(SquareOp{});
      return fn(PowScalarOp<T>{s});
    case UnaryScalar::kRSub: return fn(RSubScalarOp<T>{s});
    case UnaryScalar::kRDiv: return fn(RDivScalarOp<T>{s});
    case UnaryScalar::kGe: return fn(GeScalarOp<T>{s});
  }
}

template <typename Fn>
SG_INLINE void with_binary(Binary op, Fn&& fn) {
  switch (op) {
    case Binary::kAdd: return fn(AddOp{});
    case Binary::kSub: return fn(SubOp{});
    case Binary::kMul: return fn(MulOp{});
    case Binary::kDiv: return fn(DivOp{});
    case Binary::kPow: return fn(PowOp{});
    case Binary::kReluBackward: return fn(ReluBackwardOp{});
    case Binary::kTanhBackward: return fn(TanhBackwardOp{});
    case Binary::kSigmoidBackward: return fn(SigmoidBackwardOp{});
  }
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_ELEMENTWISE_OPS_H_

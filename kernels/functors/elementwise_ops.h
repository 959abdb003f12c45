// The per-element math of the element-wise kernels (unary, unary_scalar, binary and axpy in
// kernels.h) as SG_HOST_DEVICE functors: the cpu loops (kernels/host/loops_elementwise.cc,
// compiled once per instruction-set level) and the cuda kernels (kernels/cuda) call them
// (with_unary, with_unary_scalar and with_binary map an op code to its functor for both),
// so that every device and level computes each element alike.
//
// Transcendental functions (exp, log, log1p, tanh, erf, sin, cos, pow) go through `math::`.
// On the host that is SLEEF's deterministic ("cinz": no FMA) 1-ulp functions: the scalar
// one here and, in the cpu loops, the vector one of each level's width (vector_math.h),
// which SLEEF defines to give the scalar one's bits. A NaN result is always the positive
// quiet NaN, because SLEEF's scalar and vector code disagree on the sign of the NaN they
// make (log(-1)). So every level, vector width, thread split and strided or contiguous
// layout rounds each element alike. On a cuda device `math::` is CUDA's own functions.
// The loops are compiled without FMA contraction for the same reason.
//
// A functor whose math calls one of those functions also has a split form the vector loops
// use: `kFn` names the function, `arg` gives its argument (and `arg2` pow's exponent),
// `finish` the result from the operands and the function's value. operator() is written
// as finish(x, f(arg(x))), so both forms compute the same expression. Their NaN results
// are the positive quiet NaN too: which NaN an arithmetic operation with two NaN operands
// returns depends on their order, which the compiler may swap in vector code.
// Functors with a scalar hold it already rounded to the element type (a float32 tensor op
// uses a float32 scalar, as in PyTorch).
//
// Thread-safety: stateless values (or a scalar). Failure: none; IEEE rules for NaN/inf.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_ELEMENTWISE_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_ELEMENTWISE_OPS_H_

#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "kernels/functors/activation_ops.h"
#include "kernels/functors/math_fns.h"
#include "kernels/op_codes.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {

// ---- unary: y = f(x) ----
struct NegOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return -x; }
};
// The split form of a functor that is one function of its input: f(x).
#define SG_PLAIN_MATH_OP(Name, fn, code)                                                 \
  struct Name {                                                                          \
    static constexpr MathFn kFn = MathFn::code;                                          \
    template <typename T>                                                                \
    SG_HOST_DEVICE SG_INLINE T arg(T x) const { return x; }                              \
    template <typename T>                                                                \
    SG_HOST_DEVICE SG_INLINE T finish(T, T t, T) const { return t; }                     \
    template <typename T>                                                                \
    SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return math::fn(x); }             \
  };
SG_PLAIN_MATH_OP(ExpOp, exp, kExp)
SG_PLAIN_MATH_OP(LogOp, log, kLog)
SG_PLAIN_MATH_OP(Log1pOp, log1p, kLog1p)
SG_PLAIN_MATH_OP(TanhOp, tanh, kTanh)
SG_PLAIN_MATH_OP(ErfOp, erf, kErf)
SG_PLAIN_MATH_OP(SinOp, sin, kSin)
SG_PLAIN_MATH_OP(CosOp, cos, kCos)
#undef SG_PLAIN_MATH_OP

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
// 1 / sqrt(x): two roundings, as the reference's cpu kernel computes it.
struct RsqrtOp {
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return T(1) / math::sqrt(x); }
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
  static constexpr MathFn kFn = MathFn::kPow;
  T s;
  SG_HOST_DEVICE SG_INLINE T arg(T x) const { return x; }
  SG_HOST_DEVICE SG_INLINE T arg2(T) const { return s; }
  SG_HOST_DEVICE SG_INLINE T finish(T, T t, T) const { return t; }
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
// clamp's bounds, written so that NaN propagates (comparisons with NaN are false).
template <typename T>
struct ClampMinScalarOp {
  T s;
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return x < s ? s : x; }
};
template <typename T>
struct ClampMaxScalarOp {
  T s;
  SG_HOST_DEVICE SG_INLINE T operator()(T x) const { return x > s ? s : x; }
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
  static constexpr MathFn kFn = MathFn::kPow;
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg(T a, T) const { return a; }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T arg2(T, T b) const { return b; }
  template <typename T>
  SG_HOST_DEVICE SG_INLINE T finish(T, T, T t, T) const { return t; }
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

// ---- which functors call a transcendental function ----

template <typename...>
using VoidOf = void;

// The transcendental functions of a functor's split form (elementwise_ops.h): kNone for a
// functor without one.
template <typename Op, typename = void>
struct MathOf {
  static constexpr MathFn kFn = MathFn::kNone;
};
template <typename Op>
struct MathOf<Op, VoidOf<decltype(Op::kFn)>> {
  static constexpr MathFn kFn = Op::kFn;
};
template <typename Op, typename = void>
struct Math2Of {
  static constexpr MathFn kFn = MathFn::kNone;
};
template <typename Op>
struct Math2Of<Op, VoidOf<decltype(Op::kFn2)>> {
  static constexpr MathFn kFn = Op::kFn2;
};

// The function for elements of type T: a functor may name another one for float
// (kFnFloat: kNone for GELU's erf-free float form, gelu_float.h, which has no split form).
template <typename Op, typename T, typename = void>
struct MathFor {
  static constexpr MathFn kFn = MathOf<Op>::kFn;
};
template <typename Op>
struct MathFor<Op, float, VoidOf<decltype(Op::kFnFloat)>> {
  static constexpr MathFn kFn = Op::kFnFloat;
};
template <typename Op>
constexpr bool kCallsMath = MathOf<Op>::kFn != MathFn::kNone;
// Whether the loops run Op's split form for elements of type T (float GELU has none: its
// exp is inline, gelu_float.h).
template <typename Op, typename T>
constexpr bool kSplitFor = MathFor<Op, T>::kFn != MathFn::kNone;
// Whether the split form for elements of type T has arg2: pow's exponent, or the second
// function's argument (the second function is the same for every type: it is used only
// where the split form runs, kSplitFor).
template <typename Op, typename T>
constexpr bool kHasArg2 =
    MathFor<Op, T>::kFn == MathFn::kPow || Math2Of<Op>::kFn != MathFn::kNone;

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
    case Unary::kErf: return fn(ErfOp{});
    case Unary::kSin: return fn(SinOp{});
    case Unary::kCos: return fn(CosOp{});
    case Unary::kLog1p: return fn(Log1pOp{});
    case Unary::kRsqrt: return fn(RsqrtOp{});
    case Unary::kSilu: return fn(SiluOp{});
    case Unary::kGelu: return fn(GeluOp{});
    case Unary::kGeluTanh: return fn(GeluTanhOp{});
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
    case UnaryScalar::kClampMin: return fn(ClampMinScalarOp<T>{s});
    case UnaryScalar::kClampMax: return fn(ClampMaxScalarOp<T>{s});
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
    case Binary::kGeluBackward: return fn(GeluBackwardOp{});
    case Binary::kGeluTanhBackward: return fn(GeluTanhBackwardOp{});
    case Binary::kSiluBackward: return fn(SiluBackwardOp{});
  }
}

// Whether an op's functor calls a transcendental function: a compute-bound kernel, which
// pays to split over threads at far fewer elements than a memory-bound one.
inline bool calls_math(Unary op) {
  bool r = false;
  with_unary(op, [&r](auto f) { r = kCallsMath<decltype(f)>; });
  return r;
}
inline bool calls_math(UnaryScalar op) {
  // Only pow calls one, and x ^ 2 (a square) does not.
  return op == UnaryScalar::kPow;
}
inline bool calls_math(Binary op) {
  bool r = false;
  with_binary(op, [&r](auto f) { r = kCallsMath<decltype(f)>; });
  return r;
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_ELEMENTWISE_OPS_H_

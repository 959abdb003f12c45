// The op codes of kernels.h (Unary, UnaryScalar, Binary, Reduce, IndexCombine, Compare),
// in a header of their own so that device code (kernels/cuda) can name them without
// kernels.h's views.
//
// Thread-safety: plain enums. Failure: none.
#ifndef STREAMGRAD_KERNELS_OP_CODES_H_
#define STREAMGRAD_KERNELS_OP_CODES_H_

namespace streamgrad {
namespace kernels {

enum class Unary {
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kTanh,
  kSigmoid,
  kRelu,        // max(x, 0); NaN stays NaN
  kAbs,
  kSign,        // -1, 0 or 1; NaN stays NaN
  kReciprocal,  // 1 / x
  kSquare,
  kErf,
  kSin,
  kCos,
  kLog1p,     // log(1 + x), exact near 0
  kRsqrt,     // 1 / sqrt(x)
  kSilu,      // x * sigmoid(x)
  kGelu,      // x * Phi(x), through erf
  kGeluTanh,  // GELU's tanh approximation
};

// y = f(x, s) for a scalar s, rounded to the tensor's dtype first.
enum class UnaryScalar {
  kAdd,   // x + s
  kMul,   // x * s
  kPow,   // x ^ s
  kRSub,  // s - x
  kRDiv,  // s / x
  kGe,    // 1 where x >= s, else 0 (NaN gives 0): masks, e.g. dropout's
  kClampMin,  // x < s ? s : x (NaN stays NaN)
  kClampMax,  // x > s ? s : x (NaN stays NaN)
};

enum class Binary {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,               // a ^ b
  kReluBackward,      // a * (b > 0)        (a: gradient, b: input; 0 where b <= 0 even
                      //                     for an infinite or NaN a)
  kTanhBackward,      // a * (1 - b * b)    (b: tanh output)
  kSigmoidBackward,   // a * b * (1 - b)    (b: sigmoid output)
  kGeluBackward,      // a * gelu'(b)       (b: input; likewise the next two)
  kGeluTanhBackward,  // a * d/db of GELU's tanh approximation
  kSiluBackward,      // a * silu'(b)
};

enum class Reduce { kSum, kMax, kMin };

// How the scatter kernels combine src into out at an indexed position (scatter_add,
// scatter, scatter_reduce): out += src, out = src, out *= src, or the larger / smaller of
// the two, where a NaN wins and stays (as max / min).
enum class IndexCombine { kAdd, kAssign, kMultiply, kMax, kMin };

// Comparisons, written into a bool out (kernels/functors/select_ops.h holds the per-element math).
enum class Compare { kEq, kNe, kLt, kLe, kGt, kGe };

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_OP_CODES_H_

// The compute kernels every operator is built from, on raw strided views.
//
// Each function validates its views, then enqueues its work on `stream` through
// runtime::launch(), declaring the byte ranges it reads and writes. On cpu the work runs
// before the call returns; on sim it runs later on the stream's worker (so the views'
// memory must stay allocated until then, which the caching allocator guarantees for
// memory freed on its own stream). CUDA versions come later: on a cuda stream each
// function throws DeviceError naming the kernel.
//
// Shapes: `out` always has the iteration shape; inputs of element-wise kernels have the
// same sizes as `out` (callers broadcast with stride 0). Reductions take `out` in keepdim
// form (same rank as `in`, size 1 on reduced dims). Floating kernels accept float32 and
// float64 with all views of one dtype; copy and fill accept every dtype (copy converts).
// Accumulation in float32 reductions and matmul is done in float32 (as BLAS does).
//
// Thread-safety: any thread may call any kernel on any stream.
// Failure: ValueError for mismatched sizes or dtypes (nothing is enqueued); DeviceError
// for cuda streams.
#ifndef STREAMGRAD_KERNELS_KERNELS_H_
#define STREAMGRAD_KERNELS_KERNELS_H_

#include <cstdint>

#include "kernels/view.h"
#include "runtime/stream.h"

namespace streamgrad {
namespace kernels {

enum class Unary {
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kTanh,
  kSigmoid,
  kRelu,
  kAbs,
  kSign,        // -1, 0 or 1
  kReciprocal,  // 1 / x
  kSquare,
};

// y = f(x, s) for a scalar s.
enum class UnaryScalar {
  kAdd,   // x + s
  kMul,   // x * s
  kPow,   // x ^ s
  kRSub,  // s - x
  kRDiv,  // s / x
};

enum class Binary {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,               // a ^ b
  kReluBackward,      // a * (b > 0)        (a: gradient, b: input)
  kTanhBackward,      // a * (1 - b * b)    (b: tanh output)
  kSigmoidBackward,   // a * b * (1 - b)    (b: sigmoid output)
};

enum class Reduce { kSum, kMax, kMin };

void unary(const Stream& stream, Unary op, const View& out, const View& in);
void unary_scalar(const Stream& stream, UnaryScalar op, const View& out, const View& in,
                  double scalar);
void binary(const Stream& stream, Binary op, const View& out, const View& a, const View& b);
// out = a + alpha * b (in place allowed: out may alias a exactly).
void axpy(const Stream& stream, const View& out, const View& a, const View& b, double alpha);

void fill(const Stream& stream, const View& out, double value);
// Element-wise copy with dtype conversion; out and in have the same sizes. Overlapping
// views are not allowed unless identical.
void copy(const Stream& stream, const View& out, const View& in);
// out[i] = start + i * step over the flattened out (contiguous).
void arange(const Stream& stream, const View& out, double start, double step);
// Counter-based random numbers: element i of out (in row-major order) depends only on
// (seed, offset + i), so results do not depend on threads or devices.
void uniform(const Stream& stream, const View& out, double low, double high, uint64_t seed,
             uint64_t offset);
void normal(const Stream& stream, const View& out, double mean, double std, uint64_t seed,
            uint64_t offset);

// out (keepdim shape) = reduction of `in` over the dims where out has size 1 and in does
// not. Sum of an empty set is 0; max/min of an empty set is a ValueError.
void reduce(const Stream& stream, Reduce op, const View& out, const View& in);
// Max or min along `dim`: values and indices (int64) in keepdim shape. Ties pick the
// first index.
void arg_reduce(const Stream& stream, bool is_max, const View& values, const View& indices,
                const View& in, int64_t dim);

// out[b] = a[b] @ b_[b]: 2-D ([M,K] x [K,N] -> [M,N]) or 3-D with a batch dim (batch
// strides may be 0 for broadcasting). Uses OpenBLAS gemm (any strides: non-BLAS-able
// layouts are copied to contiguous scratch first).
void matmul(const Stream& stream, const View& out, const View& a, const View& b);

// out = in.index_select(dim, index): index is a 1-D int64 view; out.sizes[dim] ==
// index.numel(). Out-of-range indices are a ValueError when checked on the host
// (cpu) and are reported at the next synchronize (sim) — the kernel never reads outside
// `in`.
void index_select(const Stream& stream, const View& out, const View& in, int64_t dim,
                  const View& index);
// out.index_select(dim, index) += src  (duplicates accumulate).
void index_add(const Stream& stream, const View& out, int64_t dim, const View& index,
               const View& src);
// out[..., index[j], ...] += src[..., j, ...] along dim where index has src's sizes
// (the backward of max/min along a dim).
void scatter_add(const Stream& stream, const View& out, int64_t dim, const View& index,
                 const View& src);

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_KERNELS_H_

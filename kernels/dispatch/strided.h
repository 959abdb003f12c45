// Internal to the cpu kernels: a compact strided layout shared by N operands, a loop over
// it one contiguous-or-strided row at a time, and dtype dispatch.
//
// Offers:
//   kMaxDims            the highest rank a kernel accepts (checks.h enforces it).
//   Layout<N>           out's index space with each operand's strides, size-1 dims dropped
//                       and mergeable dims fused, in fixed arrays: a plain value that
//                       launch lambdas capture by value without touching the heap.
//   make_layout<N>(sizes, {strides...})
//   for_each_row(layout, fn)   calls fn(offsets[N], n, steps[N]) for every innermost row,
//                       in row-major order (so a running counter is the flat index). A
//                       fully contiguous layout is one row of numel elements, which lets
//                       the per-row loops vectorise.
//   for_each_row_range(layout, begin, end, fn)   the same for flat indices [begin, end)
//                       only: one part of a parallel split.
//   Elem<DType>, dispatch_floating(dtype, fn), dispatch_any(dtype, fn),
//   dispatch_all(dtype, fn)   fn(T{}) with the element type (bool is handled as uint8_t so
//                       that loads of arbitrary bytes stay defined); see each for the
//                       dtypes it takes.
//
// Thread-safety: pure functions on values. Failure: none; callers validate first (ranks
// above kMaxDims must be rejected before make_layout).
#ifndef STREAMGRAD_KERNELS_DISPATCH_STRIDED_H_
#define STREAMGRAD_KERNELS_DISPATCH_STRIDED_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "runtime/base/dtype.h"
#include "runtime/base/half.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

constexpr int kMaxDims = 16;

template <int N>
struct Layout {
  int ndim = 0;
  int64_t numel = 1;
  // Zeroed so that copies into launch lambdas never read indeterminate values.
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
};

// `strides[k]` points at operand k's strides, one per entry of `sizes`.
template <int N>
Layout<N> make_layout(absl::Span<const int64_t> sizes,
                      const std::array<const int64_t*, N>& strides) {
  Layout<N> l;
  for (int64_t s : sizes) l.numel *= s;
  if (l.numel == 0) return l;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;  // contributes nothing to any offset
    bool merge = l.ndim > 0;
    for (int k = 0; k < N && merge; ++k) {
      merge = l.strides[k][l.ndim - 1] == strides[k][d] * sizes[d];
    }
    if (merge) {
      l.sizes[l.ndim - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) l.strides[k][l.ndim - 1] = strides[k][d];
    } else {
      l.sizes[l.ndim] = sizes[d];
      for (int k = 0; k < N; ++k) l.strides[k][l.ndim] = strides[k][d];
      ++l.ndim;
    }
  }
  return l;
}

// Calls fn(offsets, n, steps) for the rows that hold flat (row-major) indices
// [begin, end), the first and last clipped: the unit of a parallel split. Callers keep
// 0 <= begin <= end <= l.numel.
template <int N, typename Fn>
void for_each_row_range(const Layout<N>& l, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  int64_t off[N] = {};
  int64_t step[N] = {};
  if (l.ndim == 0) {
    fn(static_cast<const int64_t*>(off), int64_t{1}, static_cast<const int64_t*>(step));
    return;
  }
  const int inner = l.ndim - 1;
  const int64_t n = l.sizes[inner];
  for (int k = 0; k < N; ++k) step[k] = l.strides[k][inner];
  // The multi-index of `begin`: its column in the innermost row, then the outer dims.
  int64_t idx[kMaxDims] = {};
  int64_t col = begin % n;
  int64_t rest = begin / n;
  for (int d = inner - 1; d >= 0; --d) {
    idx[d] = rest % l.sizes[d];
    rest /= l.sizes[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * l.strides[k][d];
  }
  int64_t left = end - begin;
  for (;;) {
    const int64_t len = n - col < left ? n - col : left;
    if (col == 0) {
      fn(static_cast<const int64_t*>(off), len, static_cast<const int64_t*>(step));
    } else {
      int64_t shifted[N];
      for (int k = 0; k < N; ++k) shifted[k] = off[k] + col * step[k];
      fn(static_cast<const int64_t*>(shifted), len, static_cast<const int64_t*>(step));
      col = 0;
    }
    left -= len;
    if (left == 0) return;
    int d = inner - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < l.sizes[d]) {
        for (int k = 0; k < N; ++k) off[k] += l.strides[k][d];
        break;
      }
      for (int k = 0; k < N; ++k) off[k] -= l.strides[k][d] * (l.sizes[d] - 1);
      idx[d] = 0;
    }
    if (d < 0) return;  // unreachable while end <= numel
  }
}

template <int N, typename Fn>
void for_each_row(const Layout<N>& l, Fn&& fn) {
  for_each_row_range(l, 0, l.numel, fn);
}

template <DType D>
struct Elem;
template <>
struct Elem<DType::kFloat32> {
  using type = float;
};
template <>
struct Elem<DType::kFloat64> {
  using type = double;
};
template <>
struct Elem<DType::kInt64> {
  using type = int64_t;
};
template <>
struct Elem<DType::kBool> {
  using type = uint8_t;
};

// float32 and float64 only: float16 and bfloat16 reach the arithmetic kernels as float32
// (cpu/widen.h), so any other dtype here is a bug, reported rather than misread.
template <typename Fn>
void dispatch_floating(DType t, Fn&& fn) {
  if (t == DType::kFloat32) {
    fn(float{});
  } else if (t == DType::kFloat64) {
    fn(double{});
  } else {
    unexpected_dtype("dispatch_floating", t);
  }
}

// The four dtypes the arithmetic kernels compute in (not float16 or bfloat16).
template <typename Fn>
void dispatch_any(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32:
      fn(float{});
      return;
    case DType::kFloat64:
      fn(double{});
      return;
    case DType::kInt64:
      fn(int64_t{});
      return;
    case DType::kBool:
      fn(uint8_t{});
      return;
    default:
      unexpected_dtype("dispatch_any", t);
  }
}

// Every dtype, the 16-bit ones as Half and BFloat16: for kernels that only move, select
// or convert elements (copy, fill, where, gather, index_select).
template <typename Fn>
void dispatch_all(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat16:
      fn(Half{});
      return;
    case DType::kBFloat16:
      fn(BFloat16{});
      return;
    default:
      dispatch_any(t, fn);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_DISPATCH_STRIDED_H_

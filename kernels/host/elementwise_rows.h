// Internal to the element-wise loops of one instruction-set level (loops_elementwise.cc and
// loops_elementwise16.cc, each compiled once per level with -DSG_CPU_LEVEL=<namespace>; see
// loops.h for the flags and the rules they keep): the row loops both apply a functor with.
//
// Each contiguous row goes to a loop the compiler vectorises: out exactly an input (in
// place: one pointer, no alias question), or out disjoint from the inputs (__restrict).
// Ops whose math calls a transcendental function (exp, tanh, pow, ...) run such a row in
// blocks: the function's arguments into a buffer, SLEEF's vector function over it
// (vector_math.h), then the rest of the functor; a strided row calls the functor, whose
// scalar function gives the same bits. Float GELU has its exp inline (gelu_float.h) and
// runs as a plain row, its disjoint rows as four interleaved streams (kLongChain below).
// Everything here is in an unnamed namespace inside the level's: each file that includes
// it has its own copies, none visible outside the level.
// Thread-safety: pure functions on caller-owned memory. Failure: none (callers check).
#ifndef STREAMGRAD_KERNELS_HOST_ELEMENTWISE_ROWS_H_
#define STREAMGRAD_KERNELS_HOST_ELEMENTWISE_ROWS_H_

#include <type_traits>

#include "kernels/functors/elementwise_ops.h"
#include "kernels/host/loops.h"
#include "kernels/host/vector_math.h"

#ifndef SG_CPU_LEVEL
#error "include this header only from a loops_<level> target's files, which define SG_CPU_LEVEL"
#endif

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace SG_CPU_LEVEL {
namespace {

// Whether n elements at p and at q share no byte.
template <typename T>
SG_INLINE bool disjoint(const T* p, const T* q, int64_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  const uintptr_t bytes = static_cast<uintptr_t>(n) * sizeof(T);
  return a + bytes <= b || b + bytes <= a;
}

// Elements per block of the transcendental rows: two buffers of it stay in L1.
constexpr int64_t kMathBlock = 256;

// The functions of one block: t = F(t) (pow: t ^ u), then u = F2(u) if there is one.
template <typename Op, typename T>
SG_INLINE void block_math(T* t, T* u, int64_t m) {
  apply_math<MathFor<Op, T>::kFn>(t, u, m);
  if constexpr (Math2Of<Op>::kFn != MathFn::kNone) {
    apply_math<Math2Of<Op>::kFn>(u, u, m);
  }
}

// Each contiguous row loop is a function of its own, never inlined into the dispatch
// around it, so that tests/kernels/loops_vectorised_test finds every one by name in the
// level's archive and checks that it is vector code (a call per row costs nothing next to
// the loop's own set-up).
#define SG_ROW __attribute__((noinline))

// Functors that are one long chain of dependent arithmetic per element: float GELU and its
// backward (gelu_float.h: an exp's and a degree-10 polynomial's FMAs one after another,
// about 60 vector instructions). In a plain loop the core's scheduler fills up with one
// vector's waiting instructions. Their disjoint rows (the ones autograd runs) go over the
// row's quarters as four interleaved streams, so that four chains are in flight, and are
// scheduled before register allocation as well as after (x86's -O2 schedules only after,
// which leaves the four streams one after another): exact GELU forward 0.314 -> 0.246 ms
// over 262,144 floats at avx2 (bench/RESULTS.md). Only these rows: elsewhere the early
// scheduling made layer norm's and batch norm's lane sums twice as slow. Element-wise,
// and scheduling moves instructions without changing one, so the bits are the plain
// loop's.
template <typename Op, typename T>
constexpr bool kLongChain =
    std::is_same_v<T, float> &&
    (std::is_same_v<Op, GeluOp> || std::is_same_v<Op, GeluBackwardOp>);

#define SG_CHAIN_ROW __attribute__((noinline, optimize("schedule-insns", "sched-pressure")))

// body(i) for every i < n, in four interleaved streams. The body must be inlined for the
// loop to vectorise (GCC would otherwise call it four times per step).
template <typename Body>
SG_INLINE void four_streams(int64_t n, Body body) {
  const int64_t q = n / 4;
  for (int64_t i = 0; i < q; ++i) {
    body(i);
    body(i + q);
    body(i + 2 * q);
    body(i + 3 * q);
  }
  for (int64_t i = 4 * q; i < n; ++i) body(i);
}

// Rows that write a buffer other than their inputs bring the lines they are about to write
// into the cache one block (4 KB) ahead. Without it, on the Intel Xeon VM of
// bench/RESULTS.md (2026-12-03), each store to a line not in the cache waited for that line
// to be read in, one after another: ReLU over 3.2 MB whose buffers were not in the cache
// took 1.0-1.1 ms, 0.58-0.63 with the prefetch (0.43-0.49 -> 0.34-0.38 when they were in
// L3). Prefetching the inputs as well gained nothing. The values are the same either way.
constexpr int64_t kStoreAheadBytes = 4096;

// body(b, e) over [0, n) in blocks of kStoreAheadBytes of out, each block's successor
// prefetched first. The body must be inlined for its loop to vectorise.
template <typename T, typename Body>
SG_INLINE void stores_ahead(T* o, int64_t n, Body body) {
  constexpr int64_t kBlock = kStoreAheadBytes / static_cast<int64_t>(sizeof(T));
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = n - b < kBlock ? n : b + kBlock;
    if (e < n) prefetch_row(o + e, n - e < kBlock ? n - e : kBlock);
    body(b, e);
  }
}

// ---- one input ----

template <typename T, typename Op>
SG_ROW void row1_inplace(T* o, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) o[i] = op(o[i]);
}

template <typename T, typename Op>
SG_ROW void row1_disjoint(T* __restrict o, const T* __restrict x, int64_t n, Op op) {
  stores_ahead(o, n, [=](int64_t b, int64_t e) __attribute__((always_inline)) {
    for (int64_t i = b; i < e; ++i) o[i] = op(x[i]);
  });
}

template <typename T, typename Op>
SG_CHAIN_ROW void row1_disjoint_chain(T* __restrict o, const T* __restrict x, int64_t n,
                                      Op op) {
  four_streams(n, [=](int64_t i) __attribute__((always_inline)) { o[i] = op(x[i]); });
}

// A row of a transcendental op; out exactly x or disjoint from it.
template <typename T, typename Op>
void row1_math(T* o, const T* x, int64_t n, Op op) {
  T t[kMathBlock], u[kMathBlock];
  for (int64_t base = 0; base < n; base += kMathBlock) {
    const int64_t m = n - base < kMathBlock ? n - base : kMathBlock;
    const T* xb = x + base;
    T* ob = o + base;
    for (int64_t i = 0; i < m; ++i) t[i] = op.arg(xb[i]);
    if constexpr (kHasArg2<Op, T>) {
      for (int64_t i = 0; i < m; ++i) u[i] = op.arg2(xb[i]);
    }
    block_math<Op>(t, u, m);
    for (int64_t i = 0; i < m; ++i) {
      const T second = Math2Of<Op>::kFn != MathFn::kNone ? u[i] : T(0);
      ob[i] = math::quiet_nan_if_nan(op.finish(xb[i], t[i], second));
    }
  }
}

template <typename T, typename Op>
void row1_strided(T* o, const T* x, int64_t n, int64_t so, int64_t sx, Op op) {
  for (int64_t i = 0; i < n; ++i) o[i * so] = op(x[i * sx]);
}

// ---- two inputs ----

template <typename T, typename Op>
SG_ROW void row2_disjoint(T* __restrict o, const T* __restrict a, const T* __restrict b,
                          int64_t n, Op op) {
  stores_ahead(o, n, [=](int64_t s, int64_t e) __attribute__((always_inline)) {
    for (int64_t i = s; i < e; ++i) o[i] = op(a[i], b[i]);
  });
}

template <typename T, typename Op>
SG_CHAIN_ROW void row2_disjoint_chain(T* __restrict o, const T* __restrict a,
                                      const T* __restrict b, int64_t n, Op op) {
  four_streams(n, [=](int64_t i) __attribute__((always_inline)) { o[i] = op(a[i], b[i]); });
}

// out is a; b is disjoint from it. The in-place update of axpy and gradient accumulation.
template <typename T, typename Op>
SG_ROW void row2_inplace_a(T* __restrict o, const T* __restrict b, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) o[i] = op(o[i], b[i]);
}

template <typename T, typename Op>
SG_ROW void row2_inplace_b(T* __restrict o, const T* __restrict a, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], o[i]);
}

template <typename T, typename Op>
SG_ROW void row2_inplace_ab(T* o, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) o[i] = op(o[i], o[i]);
}

// b is one element broadcast along the row (the bias-add shape): read once.
template <typename T, typename Op>
SG_ROW void row2_scalar_b(T* __restrict o, const T* __restrict a, T b, int64_t n, Op op) {
  stores_ahead(o, n, [=](int64_t s, int64_t e) __attribute__((always_inline)) {
    for (int64_t i = s; i < e; ++i) o[i] = op(a[i], b);
  });
}

template <typename T, typename Op>
SG_ROW void row2_inplace_scalar_b(T* o, T b, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) o[i] = op(o[i], b);
}

template <typename T, typename Op>
SG_ROW void row2_scalar_a(T* __restrict o, T a, const T* __restrict b, int64_t n, Op op) {
  stores_ahead(o, n, [=](int64_t s, int64_t e) __attribute__((always_inline)) {
    for (int64_t i = s; i < e; ++i) o[i] = op(a, b[i]);
  });
}

template <typename T, typename Op>
SG_ROW void row2_inplace_scalar_a(T* o, T a, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) o[i] = op(a, o[i]);
}

// A row of a transcendental op: out contiguous, each input either exactly out or disjoint
// from it, with step 1 or 0 (broadcast).
template <typename T, typename Op>
bool row2_math(T* o, const T* a, const T* b, int64_t n, const int64_t* step, Op op) {
  const int64_t sa = step[1], sb = step[2];
  const auto apart = [&](const T* p, int64_t sp) {
    return p == o ? sp == 1 : disjoint(o, p, sp == 0 ? 1 : n);
  };
  if (step[0] != 1 || sa > 1 || sb > 1 || sa < 0 || sb < 0 || !apart(a, sa) || !apart(b, sb)) {
    return false;
  }
  T t[kMathBlock], u[kMathBlock];
  for (int64_t base = 0; base < n; base += kMathBlock) {
    const int64_t m = n - base < kMathBlock ? n - base : kMathBlock;
    const T* ab = a + base * sa;
    const T* bb = b + base * sb;
    T* ob = o + base;
    for (int64_t i = 0; i < m; ++i) t[i] = op.arg(ab[i * sa], bb[i * sb]);
    if constexpr (kHasArg2<Op, T>) {
      for (int64_t i = 0; i < m; ++i) u[i] = op.arg2(ab[i * sa], bb[i * sb]);
    }
    block_math<Op>(t, u, m);
    for (int64_t i = 0; i < m; ++i) {
      const T second = Math2Of<Op>::kFn != MathFn::kNone ? u[i] : T(0);
      ob[i] = math::quiet_nan_if_nan(op.finish(ab[i * sa], bb[i * sb], t[i], second));
    }
  }
  return true;
}

template <typename T, typename Op>
void row2_strided(T* o, const T* a, const T* b, int64_t n, const int64_t* step, Op op) {
  const int64_t so = step[0], sa = step[1], sb = step[2];
  for (int64_t i = 0; i < n; ++i) o[i * so] = op(a[i * sa], b[i * sb]);
}

// Runs a row in a vector variant if one applies (out exactly an input, or disjoint from
// the inputs); returns false for the plain loop.
template <typename T, typename Op>
bool row2_fast(T* o, const T* a, const T* b, int64_t n, const int64_t* step, Op op) {
  if (step[0] != 1) return false;
  if (step[1] == 1 && step[2] == 1) {
    const bool oa = o == a, ob = o == b;
    if (oa && ob) {
      row2_inplace_ab(o, n, op);
    } else if (oa && disjoint(o, b, n)) {
      row2_inplace_a(o, b, n, op);
    } else if (ob && disjoint(o, a, n)) {
      row2_inplace_b(o, a, n, op);
    } else if (disjoint(o, a, n) && disjoint(o, b, n)) {
      if constexpr (kLongChain<Op, T>) {
        row2_disjoint_chain(o, a, b, n, op);
      } else {
        row2_disjoint(o, a, b, n, op);
      }
    } else {
      return false;
    }
    return true;
  }
  if (step[1] == 1 && step[2] == 0) {
    if (o == a) {
      row2_inplace_scalar_b(o, *b, n, op);
    } else if (disjoint(o, a, n)) {
      row2_scalar_b(o, a, *b, n, op);
    } else {
      return false;
    }
    return true;
  }
  if (step[1] == 0 && step[2] == 1) {
    if (o == b) {
      row2_inplace_scalar_a(o, *a, n, op);
    } else if (disjoint(o, b, n)) {
      row2_scalar_a(o, *a, b, n, op);
    } else {
      return false;
    }
    return true;
  }
  return false;
}

}  // namespace
}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_ELEMENTWISE_ROWS_H_

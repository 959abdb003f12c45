// The element-wise loops (unary, unary_scalar, binary, axpy) of one instruction-set level:
// compiled once per level with -DSG_CPU_LEVEL=<namespace> (see loops.h for the flags and
// the rules this file keeps). float32 and float64 here, over the row loops of
// elementwise_rows.h; float16 and bfloat16 in loops_elementwise16.cc.
#include "kernels/host/elementwise_rows.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace SG_CPU_LEVEL {

// Defined in loops_copy.cc, loops_reduce.cc and loops_elementwise16.cc of the same level.
void fill(DType dt, const Layout<1>& l, void* out, double value, int64_t begin, int64_t end);
void copy(DType to, DType from, const Layout<2>& l, void* out, const void* in, int64_t begin,
          int64_t end);
double sum_block(DType dt, const void* p, int64_t n);
void extreme(bool is_max, DType dt, const void* p, int64_t n, void* acc);
void columns(Reduce op, DType dt, void* acc, const void* row, int64_t n);
void unary_16(Unary op, DType dt, const Layout<2>& l, void* out, const void* in, int64_t b,
              int64_t e);
void unary_scalar_16(UnaryScalar op, DType dt, const Layout<2>& l, void* out, const void* in,
                     float scalar, int64_t b, int64_t e);
void binary_16(Binary op, DType dt, const Layout<3>& l, void* out, const void* a,
               const void* pb, int64_t b, int64_t e);
void axpy_16(DType dt, const Layout<3>& l, void* out, const void* a, const void* pb,
             float alpha, int64_t b, int64_t e);

namespace {

template <typename T, typename Op>
void map1(const Layout<2>& l, void* out, const void* in, int64_t begin, int64_t end, Op op) {
  T* const o0 = static_cast<T*>(out);
  const T* const x0 = static_cast<const T*>(in);
  for_each_row_range(l, begin, end, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    const T* x = x0 + off[1];
    if constexpr (kSplitFor<Op, T>) {
      if (step[0] == 1 && step[1] == 1 && (o == x || disjoint(o, x, n))) {
        row1_math(o, x, n, op);
        return;
      }
    } else if (step[0] == 1 && step[1] == 1) {
      if (o == x) {
        row1_inplace(o, n, op);
        return;
      }
      if (disjoint(o, x, n)) {
        if constexpr (kLongChain<Op, T>) {
          row1_disjoint_chain(o, x, n, op);
        } else {
          row1_disjoint(o, x, n, op);
        }
        return;
      }
    }
    row1_strided(o, x, n, step[0], step[1], op);
  });
}

template <typename T, typename Op>
void map2(const Layout<3>& l, void* out, const void* a, const void* b, int64_t begin,
          int64_t end, Op op) {
  T* const o0 = static_cast<T*>(out);
  const T* const a0 = static_cast<const T*>(a);
  const T* const b0 = static_cast<const T*>(b);
  for_each_row_range(l, begin, end, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    const T* x = a0 + off[1];
    const T* y = b0 + off[2];
    if constexpr (kSplitFor<Op, T>) {
      if (row2_math(o, x, y, n, step, op)) return;
    } else if (row2_fast(o, x, y, n, step, op)) {
      return;
    }
    row2_strided(o, x, y, n, step, op);
  });
}

// ---- the ops ----

template <typename T>
void run_unary(Unary op, const Layout<2>& l, void* o, const void* x, int64_t b, int64_t e) {
  with_unary(op, [&](auto f) { map1<T>(l, o, x, b, e, f); });
}

template <typename T>
void run_unary_scalar(UnaryScalar op, const Layout<2>& l, void* o, const void* x, T s,
                      int64_t b, int64_t e) {
  with_unary_scalar(op, s, [&](auto f) { map1<T>(l, o, x, b, e, f); });
}

template <typename T>
void run_binary(Binary op, const Layout<3>& l, void* o, const void* pa, const void* pb,
                int64_t b, int64_t e) {
  with_binary(op, [&](auto f) { map2<T>(l, o, pa, pb, b, e, f); });
}

void unary(Unary op, DType dt, const Layout<2>& l, void* out, const void* in, int64_t b,
           int64_t e) {
  if (dt == DType::kFloat32) return run_unary<float>(op, l, out, in, b, e);
  if (is_reduced_floating(dt)) return unary_16(op, dt, l, out, in, b, e);
  run_unary<double>(op, l, out, in, b, e);
}

// 16-bit: the scalar is a 16-bit value already (the front door rounds it), exactly a float.
void unary_scalar(UnaryScalar op, DType dt, const Layout<2>& l, void* out, const void* in,
                  double scalar, int64_t b, int64_t e) {
  if (dt == DType::kFloat32) {
    return run_unary_scalar<float>(op, l, out, in, static_cast<float>(scalar), b, e);
  }
  if (is_reduced_floating(dt)) {
    return unary_scalar_16(op, dt, l, out, in, static_cast<float>(scalar), b, e);
  }
  run_unary_scalar<double>(op, l, out, in, scalar, b, e);
}

void binary(Binary op, DType dt, const Layout<3>& l, void* out, const void* a, const void* pb,
            int64_t b, int64_t e) {
  if (dt == DType::kFloat32) return run_binary<float>(op, l, out, a, pb, b, e);
  if (is_reduced_floating(dt)) return binary_16(op, dt, l, out, a, pb, b, e);
  run_binary<double>(op, l, out, a, pb, b, e);
}

void axpy(DType dt, const Layout<3>& l, void* out, const void* a, const void* pb, double alpha,
          int64_t b, int64_t e) {
  if (dt == DType::kFloat32) {
    return map2<float>(l, out, a, pb, b, e, AxpyOp<float>{static_cast<float>(alpha)});
  }
  if (is_reduced_floating(dt)) {
    return axpy_16(dt, l, out, a, pb, static_cast<float>(alpha), b, e);
  }
  map2<double>(l, out, a, pb, b, e, AxpyOp<double>{alpha});
}

}  // namespace

extern const Loops kLoops = {
#if defined(SG_CPU_LEVEL_AVX512)
    CpuCapability::kAvx512,
#elif defined(SG_CPU_LEVEL_AVX2)
    CpuCapability::kAvx2,
#else
    CpuCapability::kDefault,
#endif
    unary, unary_scalar, binary, axpy, fill, copy, sum_block, extreme, columns,
};

}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

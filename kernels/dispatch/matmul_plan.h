// Internal to the kernels: how a matmul's operands reach a BLAS gemm, worked out once on
// the host and shared by the cpu path (OpenBLAS, kernels/matmul.cc) and the cuda path
// (cuBLAS, kernels/cuda/matmul.cu).
//
// Row-major and column-major operands go to gemm as they are (no transpose / transpose,
// with their leading dimension); anything else is `packed`: copied to contiguous scratch
// first. A column-major out is handled as out^T = b^T a^T, so the common
// transposed-gradient layouts never need scratch. Offsets and strides are in elements.
//
// Thread-safety: plain values and pure functions. Failure: none (matmul checks the views
// first).
#ifndef STREAMGRAD_KERNELS_DISPATCH_MATMUL_PLAN_H_
#define STREAMGRAD_KERNELS_DISPATCH_MATMUL_PLAN_H_

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>

#include "kernels/view.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

// One operand as the gemm sees it: a [rows, cols] matrix per batch member.
struct Mat {
  const void* base = nullptr;  // unused for out, whose pointer travels separately
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0, col_stride = 0;
  int64_t batch_stride = 0;  // 0: one matrix broadcast over the batch
  // How gemm reads it directly; packed == true means "copy to contiguous first".
  bool packed = false;
  bool trans = false;  // stored column-major: gemm reads it transposed
  int ld = 0;
};

// A bias added by gemm itself (beta = 1 over an output that starts as the bias): element
// `stride * i` for row i of the gemm's output when `by_row` (out was transposed for the
// gemm), for column i otherwise.
struct Bias {
  const void* data = nullptr;
  int64_t stride = 0;
  bool by_row = false;
};

struct MatmulPlan {
  Mat a, b, c;
  int64_t batch = 1;
  Bias bias;
  // a's and b's dtype: out's, except where an implementation that takes 16-bit operands
  // (cuda's) multiplies float16 or bfloat16 into a float32 out.
  DType ab_dtype = DType::kFloat32;
};

inline Mat describe_mat(const View& v) {
  const int64_t r = v.dim();
  Mat m;
  m.base = v.data;
  m.rows = v.sizes[r - 2];
  m.cols = v.sizes[r - 1];
  m.row_stride = v.strides[r - 2];
  m.col_stride = v.strides[r - 1];
  m.batch_stride = r == 3 ? v.strides[0] : 0;
  return m;
}

inline Mat transposed(Mat m) {
  std::swap(m.rows, m.cols);
  std::swap(m.row_stride, m.col_stride);
  return m;
}

// Decides whether gemm can read `m` in place, and how.
inline void plan(Mat* m) {
  const int64_t rows = m->rows, cols = m->cols;
  const int64_t sr = m->row_stride, sc = m->col_stride;
  int64_t ld = -1;
  if ((cols <= 1 || sc == 1) && (rows <= 1 || sr >= std::max<int64_t>(1, cols))) {
    m->trans = false;
    ld = rows <= 1 ? std::max<int64_t>(1, cols) : sr;
  } else if ((rows <= 1 || sr == 1) && (cols <= 1 || sc >= std::max<int64_t>(1, rows))) {
    m->trans = true;
    ld = cols <= 1 ? std::max<int64_t>(1, rows) : sc;
  }
  m->packed = ld < 0 || ld > INT_MAX;
  if (m->packed) {
    m->trans = false;
    ld = std::max<int64_t>(1, cols);
  }
  m->ld = static_cast<int>(ld);
}

// out = a b (+ bias) for checked views of rank 2 or 3.
inline MatmulPlan plan_matmul(const View& out, const View& a, const View& b, Bias bias) {
  MatmulPlan p;
  p.bias = bias;
  p.ab_dtype = a.dtype;
  p.batch = out.dim() == 3 ? out.sizes[0] : 1;
  Mat ma = describe_mat(a), mb = describe_mat(b), mc = describe_mat(out);
  plan(&mc);
  if (mc.packed || mc.trans) {
    // A column-major out is a row-major out^T = b^T a^T; a layout gemm cannot write at
    // all goes through scratch.
    Mat ct = transposed(mc);
    plan(&ct);
    if (!ct.packed && !ct.trans) {
      mc = ct;
      p.bias.by_row = true;
      Mat na = transposed(mb), nb = transposed(ma);
      ma = na;
      mb = nb;
    } else {
      mc.packed = true;
      mc.trans = false;
      mc.ld = static_cast<int>(std::max<int64_t>(1, mc.cols));
    }
  }
  plan(&ma);
  plan(&mb);
  p.a = ma;
  p.b = mb;
  p.c = mc;
  return p;
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_DISPATCH_MATMUL_PLAN_H_

// matmul through OpenBLAS gemm. Row-major and column-major operands go to BLAS as they
// are (NoTrans / Trans with their leading dimension); anything else is packed into
// contiguous scratch inside the task. A column-major out is handled by computing
// out^T = b^T a^T, so the common transposed-gradient layouts never need scratch.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/launch_kernel.h"
#include "kernels/kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

// One operand as the task sees it: a [rows, cols] matrix per batch member.
struct Mat {
  const void* base = nullptr;  // unused for out, whose pointer travels separately
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0, col_stride = 0;
  int64_t batch_stride = 0;  // elements
  // How BLAS reads it directly; packed == true means "copy to contiguous first".
  bool packed = false;
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int ld = 0;
};

Mat describe_mat(const View& v) {
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

Mat transposed(Mat m) {
  std::swap(m.rows, m.cols);
  std::swap(m.row_stride, m.col_stride);
  return m;
}

// Decides whether gemm can read `m` in place, and how.
void plan(Mat* m) {
  const int64_t rows = m->rows, cols = m->cols;
  const int64_t sr = m->row_stride, sc = m->col_stride;
  int64_t ld = -1;
  if ((cols <= 1 || sc == 1) && (rows <= 1 || sr >= std::max<int64_t>(1, cols))) {
    m->trans = CblasNoTrans;
    ld = rows <= 1 ? std::max<int64_t>(1, cols) : sr;
  } else if ((rows <= 1 || sr == 1) && (cols <= 1 || sc >= std::max<int64_t>(1, rows))) {
    m->trans = CblasTrans;
    ld = cols <= 1 ? std::max<int64_t>(1, rows) : sc;
  }
  m->packed = ld < 0 || ld > INT_MAX;
  if (m->packed) {
    m->trans = CblasNoTrans;
    ld = std::max<int64_t>(1, cols);
  }
  m->ld = static_cast<int>(ld);
}

template <typename T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc) {
  if constexpr (std::is_same<T, float>::value) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
  }
}

// A bias added by gemm itself (beta = 1 over an output that starts as the bias):
// element `stride * i` for row i of the BLAS output when `by_row` (the output was
// transposed for BLAS), for column i otherwise.
struct Bias {
  const void* data = nullptr;
  int64_t stride = 0;
  bool by_row = false;
};

template <typename T>
void pack(const Mat& m, const T* src, T* dst) {
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) {
      dst[i * m.cols + j] = src[i * m.row_stride + j * m.col_stride];
    }
  }
}

template <typename T>
void unpack(const Mat& m, const T* src, T* dst) {
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) {
      dst[i * m.row_stride + j * m.col_stride] = src[i * m.cols + j];
    }
  }
}

// Operand `m` of batch member `b`, packed into `scratch` when BLAS cannot read it. A
// broadcast operand (batch stride 0) is packed once.
template <typename T>
const T* operand(const Mat& m, int64_t b, std::vector<T>* scratch) {
  const T* p = static_cast<const T*>(m.base) + b * m.batch_stride;
  if (!m.packed) return p;
  if (scratch->empty() || m.batch_stride != 0) {
    scratch->resize(static_cast<size_t>(m.rows * m.cols));
    pack(m, p, scratch->data());
  }
  return scratch->data();
}

template <typename T>
void run(const Mat& a, const Mat& b, const Mat& c, void* out_base, int64_t batch, Bias bias) {
  std::vector<T> sa, sb, sc;
  if (c.packed) sc.resize(static_cast<size_t>(c.rows * c.cols));
  const T* bv = static_cast<const T*>(bias.data);
  for (int64_t i = 0; i < batch; ++i) {
    T* out = static_cast<T*>(out_base) + i * c.batch_stride;
    T* dst = c.packed ? sc.data() : out;  // row-major with leading dimension c.ld
    // gemm adds to the bias (beta = 1); an empty sum (k == 0, which BLAS is not asked
    // about) leaves the bias, or zero without one.
    if (bv != nullptr || a.cols == 0) {
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t j = 0; j < c.cols; ++j) {
          dst[r * c.ld + j] = bv == nullptr ? T(0) : bv[(bias.by_row ? r : j) * bias.stride];
        }
      }
    }
    if (a.cols != 0) {
      gemm<T>(a.trans, b.trans, static_cast<int>(c.rows), static_cast<int>(c.cols),
              static_cast<int>(a.cols), operand(a, i, &sa), a.ld, operand(b, i, &sb), b.ld,
              bv == nullptr ? T(0) : T(1), dst, c.ld);
    }
    if (c.packed) unpack(c, sc.data(), out);
  }
}

}  // namespace

void matmul(const Stream& stream, const View& out, const View& a, const View& b,
            const View* bias) {
  const char* name = bias == nullptr ? "matmul" : "linear";
  cpu::check_floating_out_a_b(name, stream, out, a, b);
  const int64_t r = out.dim();
  SG_CHECK((r == 2 || r == 3) && a.dim() == r && b.dim() == r, ValueError, name,
           ": expected out, a and b all 2-D or all 3-D, got out ", cpu::describe(out),
           ", a ", cpu::describe(a), ", b ", cpu::describe(b));
  const int64_t m = a.sizes[r - 2], k = a.sizes[r - 1], n = b.sizes[r - 1];
  const bool batch_ok = r == 2 || (a.sizes[0] == out.sizes[0] && b.sizes[0] == out.sizes[0]);
  SG_CHECK(batch_ok && b.sizes[r - 2] == k && out.sizes[r - 2] == m && out.sizes[r - 1] == n,
           ValueError, name, ": cannot multiply a ", cpu::describe(a), " by b ",
           cpu::describe(b), " into out ", cpu::describe(out),
           "; expected [B,] M x K times [B,] K x N into [B,] M x N");
  SG_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, ValueError, name,
           ": dims of a ", cpu::describe(a), " and b ", cpu::describe(b),
           " exceed BLAS's 32-bit sizes");
  cpu::check_disjoint(name, "out", out, "a", a);
  cpu::check_disjoint(name, "out", out, "b", b);
  Bias bs;
  if (bias != nullptr) {
    SG_CHECK(r == 2 && bias->dim() == 1 && bias->sizes[0] == n && bias->dtype == out.dtype,
             ValueError, name, ": bias ", cpu::describe(*bias), " must be 1-D of ", n,
             " elements of out's dtype, with a 2-D out ", cpu::describe(out));
    cpu::check_disjoint(name, "out", out, "bias", *bias);
    bs.data = bias->data;
    bs.stride = bias->strides[0];
  }
  if (out.numel() == 0) return;

  Mat ma = describe_mat(a), mb = describe_mat(b), mc = describe_mat(out);
  plan(&mc);
  if (mc.packed || mc.trans == CblasTrans) {
    // A column-major out is a row-major out^T = b^T a^T; a layout BLAS cannot write at
    // all goes through scratch.
    Mat ct = transposed(mc);
    plan(&ct);
    if (!ct.packed && ct.trans == CblasNoTrans) {
      mc = ct;
      bs.by_row = true;
      Mat na = transposed(mb), nb = transposed(ma);
      ma = na;
      mb = nb;
    } else {
      mc.packed = true;
      mc.trans = CblasNoTrans;
      mc.ld = static_cast<int>(std::max<int64_t>(1, mc.cols));
    }
  }
  plan(&ma);
  plan(&mb);
  const int64_t batch = r == 3 ? out.sizes[0] : 1;
  const DType dt = out.dtype;
  void* o = out.data;
  cpu::launch_kernel(stream, name, {&a, &b, bias}, {&out}, [ma, mb, mc, o, batch, dt, bs] {
    if (dt == DType::kFloat32) {
      run<float>(ma, mb, mc, o, batch, bs);
    } else {
      run<double>(ma, mb, mc, o, batch, bs);
    }
  });
}

}  // namespace kernels
}  // namespace streamgrad

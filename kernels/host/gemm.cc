#include "kernels/host/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <type_traits>

#include "kernels/host/onednn_threads.h"
#include "kernels/host/parallel.h"
#include "kernels/host/tsan_announce.h"
#include "oneapi/dnnl/dnnl.h"
#include "runtime/backend/cpu_settings.h"

// Declared here as OpenBLAS exports them, whichever cblas.h the system's alternatives
// pick (Debian's netlib cblas.h lacks them); the build links OpenBLAS itself.
extern "C" {
void openblas_set_num_threads(int num_threads);
}

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

template <typename T>
void gemv(bool trans, int rows, int cols, const T* a, int lda, const T* x, int incx, T beta,
          T* y, int incy) {
  const CBLAS_TRANSPOSE t = trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same<T, float>::value) {
    cblas_sgemv(CblasRowMajor, t, rows, cols, 1.0f, a, lda, x, incx, beta, y, incy);
  } else {
    cblas_dgemv(CblasRowMajor, t, rows, cols, 1.0, a, lda, x, incx, beta, y, incy);
  }
}

// C = op(A) op(B) + beta C, row-major. A product with one row or one column goes to gemv:
// a gemm would pack the whole matrix operand first, which costs more than the product
// itself (a batch of one through a linear layer, and its backward). float32 gemms go to
// oneDNN's sgemm (gemm.h says why), except under ThreadSanitizer, which cannot see into
// oneDNN's JIT code and its first-call set-up.
template <typename T>
void blas(bool trans_a, bool trans_b, int m, int n, int k, const T* a, int lda, const T* b,
          int ldb, T beta, T* c, int ldc) {
  // OpenBLAS and oneDNN are not instrumented: ThreadSanitizer learns the operands here.
  announce_matrix(a, trans_a ? k : m, trans_a ? m : k, lda, sizeof(T), false);
  announce_matrix(b, trans_b ? n : k, trans_b ? k : n, ldb, sizeof(T), false);
  announce_matrix(c, m, n, ldc, sizeof(T), true);  // written (and read when beta != 0)
  if (m == 1 && n > 1) {  // c[n] = op(B)^T x, x the one row of op(A)
    const int incx = trans_a ? lda : 1;
    if (trans_b) return gemv<T>(false, n, k, b, ldb, a, incx, beta, c, 1);
    return gemv<T>(true, k, n, b, ldb, a, incx, beta, c, 1);
  }
  if (n == 1 && m > 1) {  // c[m] = op(A) x, x the one column of op(B)
    const int incx = trans_b ? 1 : ldb;
    if (trans_a) return gemv<T>(true, k, m, a, lda, b, incx, beta, c, ldc);
    return gemv<T>(false, m, k, a, lda, b, incx, beta, c, ldc);
  }
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same<T, float>::value) {
#ifdef SG_HOST_UNDER_TSAN
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
#else
    dnnl_status_t status;
    {
      const OneOmpThread one;
      status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b,
                          ldb, beta, c, ldc);
    }
    // Sizes matmul checked; should oneDNN still refuse, OpenBLAS computes the same product.
    if (status != dnnl_success) {
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    }
#endif
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
  }
}

// Cutting columns repeats the packing of A (m x k) in every block, cutting rows that of
// B (k x n): cut the dimension whose repeated operand is smaller.
bool cut_columns(int64_t m, int64_t n) { return m <= n; }

// The first row or column of block `i` of `blocks` over `extent`, on aligned edges.
int64_t block_start(int64_t i, int64_t blocks, int64_t extent) {
  const int64_t units = (extent + kGemmBlockAlign - 1) / kGemmBlockAlign;
  return std::min(extent, units * i / blocks * kGemmBlockAlign);
}

// At static initialisation: a process that loads the kernels runs OpenBLAS on one thread
// from the start, whoever calls it.
const bool kPinnedAtLoad = (pin_blas_threads(), true);

}  // namespace

void pin_blas_threads() {
  static const bool pinned = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)pinned;
  (void)kPinnedAtLoad;
}

int64_t gemm_blocks(int64_t m, int64_t n, int64_t k) {
  const int64_t work = m * n * k;  // matmul checked that m, n, k fit in int
  if (work < 2 * kGemmGrain) return 1;
  const int64_t extent = cut_columns(m, n) ? n : m;
  const int64_t units = (extent + kGemmBlockAlign - 1) / kGemmBlockAlign;
  const int64_t blocks =
      std::min({static_cast<int64_t>(get_num_threads()), work / kGemmGrain, units});
  // Inside a parallel chunk (or with one thread) parallel_for would run inline anyway.
  return blocks > 1 && detail::should_split(0, blocks, 1) ? blocks : 1;
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const T* a, int lda, const T* b,
          int ldb, T beta, T* c, int ldc) {
  pin_blas_threads();
  const int64_t blocks = gemm_blocks(m, n, k);
  if (blocks == 1) return blas<T>(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  const bool columns = cut_columns(m, n);
  const int64_t extent = columns ? n : m;
  // Blocks [b0, b1) of a chunk are one contiguous range: one gemm per chunk.
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    const int64_t lo = block_start(b0, blocks, extent);
    const int size = static_cast<int>(block_start(b1, blocks, extent) - lo);
    if (size == 0) return;
    if (columns) {  // C[:, lo:lo+size] = op(A) op(B)[:, lo:lo+size]
      const T* bb = trans_b ? b + lo * ldb : b + lo;
      blas<T>(trans_a, trans_b, m, size, k, a, lda, bb, ldb, beta, c + lo, ldc);
    } else {  // C[lo:lo+size, :] = op(A)[lo:lo+size, :] op(B)
      const T* ab = trans_a ? a + lo : a + lo * lda;
      blas<T>(trans_a, trans_b, size, n, k, ab, lda, b, ldb, beta, c + lo * ldc, ldc);
    }
  });
}

template void gemm<float>(bool, bool, int, int, int, const float*, int, const float*, int,
                          float, float*, int);
template void gemm<double>(bool, bool, int, int, int, const double*, int, const double*, int,
                           double, double*, int);

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

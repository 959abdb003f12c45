// Internal to the cpu kernels: the one way they call BLAS gemm, with streamgrad's thread
// count (runtime/backend/cpu_settings.h) instead of the libraries' own threads.
//
//   cpu::gemm<float>(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
//
// Which library: float32 products go to oneDNN's sgemm (JIT-compiled for the processor,
// on one OpenMP thread), float64 products and every one-row or one-column product
// (gemv) to OpenBLAS. Debian's OpenBLAS 0.3.21 does not recognise the Zen 4 EPYC these
// machines have and runs its AVX2 kernels; oneDNN's AVX-512 sgemm (already linked for the
// convolutions) is about twice as fast for the products of the models here, 1024 x 384 x
// 128 in 0.51 ms against 0.97 (bench/RESULTS.md, 2026-11-27). Under ThreadSanitizer float32
// goes to OpenBLAS too.
//
// Why not the libraries' threads: after every multi-threaded call, OpenBLAS's pthread pool
// busy-waits with sched_yield for 2^28 cycles (about 0.1 s) before it sleeps. The timeout
// (OPENBLAS_THREAD_TIMEOUT) is read once, when the library loads, so a program cannot
// shorten it; on a training loop with a gemm every few milliseconds the pool never sleeps
// and takes the core the next kernel (or another process) needs. So OpenBLAS is kept at one
// thread (pin_blas_threads: set when this library loads and again before the first gemm),
// and a product of at least 2 * kGemmGrain multiply-adds is cut into up to
// get_num_threads() blocks of rows or of columns of C, each one single-threaded gemm, run
// over the kernels' pool (kernels/host/parallel.h), whose idle workers spin for
// get_thread_spin_us() (2 ms by default, settable) before they sleep. A block never waits
// for another, so a thread that loses its core delays only
// its own block (OpenBLAS's threads wait for each other inside a call).
//
// Results: each item of a batch is one gemm call whatever the thread count, so batched
// products are bitwise the same at every count. A product cut into blocks may differ from
// the uncut one in the last bits: a library's kernels may treat a block's edge rows or
// columns as a tail (OpenBLAS's Haswell kernels do; its SkylakeX ones and oneDNN's gave
// the same bits for the shapes of tests/kernels/gemm_threads_test), as libtorch's
// matmul may differ between thread counts. The cut depends only on the shape and the
// thread count, so a run repeats bit for bit; with one thread nothing is cut.
//
// Thread-safety: any thread may call gemm, concurrently (sim streams do). A program that
// raises OpenBLAS's thread count itself after pin_blas_threads gets OpenBLAS's threads inside
// each block. Failure: none (matmul checks the views; sizes fit in int).
#ifndef STREAMGRAD_KERNELS_HOST_GEMM_H_
#define STREAMGRAD_KERNELS_HOST_GEMM_H_

#include <cstdint>

namespace streamgrad {
namespace kernels {
namespace cpu {

// Multiply-adds per block below which another thread costs more than it saves: waking a
// pool worker costs some 10-30 us on a busy 2-core machine, and 4M multiply-adds take about
// 65 us at OpenBLAS's 125 GFLOP/s per core there (bench/RESULTS.md, issue 24).
constexpr int64_t kGemmGrain = int64_t{1} << 22;
// Block edges are multiples of this many rows or columns (whole cache lines of floats).
constexpr int64_t kGemmBlockAlign = 16;

// Sets OpenBLAS to one thread, once per process (later calls do nothing).
void pin_blas_threads();

// Into how many blocks gemm cuts an m x n x k product when called now: 1 for fewer than
// 2 * kGemmGrain multiply-adds, with get_num_threads() == 1 or inside a parallel_for
// chunk; otherwise min(get_num_threads(), m * n * k / kGemmGrain, aligned units of the cut
// dimension).
int64_t gemm_blocks(int64_t m, int64_t n, int64_t k);

// C = op(A) op(B) + beta C, row-major, as cblas_sgemm / cblas_dgemm with alpha = 1: op(A)
// is m x k (A stored k x m when trans_a), op(B) k x n, C m x n.
template <typename T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const T* a, int lda, const T* b,
          int ldb, T beta, T* c, int ldc);

extern template void gemm<float>(bool, bool, int, int, int, const float*, int, const float*,
                                 int, float, float*, int);
extern template void gemm<double>(bool, bool, int, int, int, const double*, int,
                                  const double*, int, double, double*, int);

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_GEMM_H_

// matmul on cuda streams through cuBLAS (kernels/cuda/cuda_kernels.h). The plan
// (kernels/dispatch/matmul_plan.h) is the one the cpu path uses; cuBLAS is column-major, so the
// row-major product C = A B is issued as C^T = B^T A^T, which reads every row-major operand
// as it lies. One strided-batched gemm covers the batch (a broadcast operand has batch
// stride 0); packed operands and a packed out go through contiguous scratch allocated on
// the launch's own stream, so the caching allocator hands it out again only after the
// stream has passed this work.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/stream_handles.cuh"
#include "runtime/backend/cuda_settings.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/memory/storage.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

// cuBLAS's own recommendation for Hopper; smaller GPUs use less of it.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

void check_cublas(cublasStatus_t status, const char* what, const Stream& stream) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw DeviceError(absl::StrCat(
      "matmul: ", what, " on ", stream.str(), " failed with ", cublasGetStatusName(status),
      " (", cublasGetStatusString(status), "); ", kLibraryFailureHint));
}

// cuBLAS's handle of a stream, with its workspace (stream_handles.cuh).
using Handle = StreamHandle<cublasHandle_t>;

Handle& handle_for(const Stream& stream) {
  return handle_for_stream<Handle>(stream, [&](Handle& fresh) {
    check_cublas(cublasCreate(&fresh.handle), "cublasCreate", stream);
    check_cublas(cublasSetStream(fresh.handle, raw_cuda_stream(stream)), "cublasSetStream",
                 stream);
    void* workspace = nullptr;
    check_cuda(cudaMalloc(&workspace, kWorkspaceBytes), "matmul: the cuBLAS workspace");
    check_cublas(cublasSetWorkspace(fresh.handle, workspace, kWorkspaceBytes),
                 "cublasSetWorkspace", stream);
  });
}

// A [batch, rows, cols] walk of `m` (rows and cols by its strides) against a contiguous
// one: the layout that packs m into scratch (operand 0 the scratch, 1 the matrix), or
// with the operands swapped, unpacks scratch into it.
cpu::Layout<2> pack_layout(const cpu::Mat& m, int64_t batch, bool unpack) {
  const int64_t sizes[3] = {batch, m.rows, m.cols};
  const int64_t dense[3] = {m.rows * m.cols, m.cols, 1};
  const int64_t strided[3] = {m.batch_stride, m.row_stride, m.col_stride};
  return cpu::make_layout<2>(sizes, {unpack ? strided : dense, unpack ? dense : strided});
}

// Members of the batch whose copy of `m` is distinct: one for a broadcast operand.
int64_t distinct(const cpu::Mat& m, int64_t batch) { return m.batch_stride == 0 ? 1 : batch; }

// m's data as gemm reads it: in place, or packed into `scratch` on the stream.
template <typename T>
const T* operand(const Stream& stream, const cpu::Mat& m, int64_t batch, DType dt,
                 Storage* scratch, long long* batch_stride) {
  if (!m.packed) {
    *batch_stride = m.batch_stride;
    return static_cast<const T*>(m.base);
  }
  const int64_t n = distinct(m, batch);
  *scratch = Storage::allocate(static_cast<size_t>(n * m.rows * m.cols) * sizeof(T), stream);
  copy(stream, dt, dt, pack_layout(m, n, false), scratch->data(), m.base);
  *batch_stride = n == 1 ? 0 : m.rows * m.cols;
  return static_cast<const T*>(scratch->data());
}

template <typename T>
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const T* alpha, const T* a, int lda, long long sa, const T* b,
                    int ldb, long long sb, const T* beta, T* c, int ldc, long long sc,
                    int batch) {
  if constexpr (std::is_same<T, float>::value) {
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta,
                                     c, ldc, sc, batch);
  } else {
    return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta,
                                     c, ldc, sc, batch);
  }
}

template <typename T>
void run(const Stream& stream, const cpu::MatmulPlan& p, void* out, DType dt) {
  const cpu::Mat &a = p.a, &b = p.b, &c = p.c;
  const int64_t batch = p.batch;
  Storage sa, sb, sc;
  long long stride_a = 0, stride_b = 0;
  const T* pa = operand<T>(stream, a, batch, dt, &sa, &stride_a);
  const T* pb = operand<T>(stream, b, batch, dt, &sb, &stride_b);
  // The gemm's C: out itself, or contiguous scratch copied back at the end.
  T* dst = static_cast<T*>(out);
  long long stride_c = c.batch_stride;
  if (c.packed) {
    sc = Storage::allocate(static_cast<size_t>(batch * c.rows * c.cols) * sizeof(T), stream);
    dst = static_cast<T*>(sc.data());
    stride_c = c.rows * c.cols;
  }
  // gemm adds to the bias (beta = 1); an empty sum (k == 0) leaves the bias, or zero.
  const bool has_bias = p.bias.data != nullptr;
  if (has_bias || a.cols == 0) {
    const int64_t sizes[3] = {batch, c.rows, c.cols};
    const int64_t dst_strides[3] = {stride_c, c.ld, 1};
    if (has_bias) {
      const int64_t bias_strides[3] = {0, p.bias.by_row ? p.bias.stride : 0,
                                       p.bias.by_row ? 0 : p.bias.stride};
      copy(stream, dt, dt, cpu::make_layout<2>(sizes, {dst_strides, bias_strides}), dst,
           p.bias.data);
    } else {
      fill(stream, dt, cpu::make_layout<1>(sizes, {dst_strides}), dst, 0.0);
    }
  }
  if (a.cols != 0) {
    Handle& h = handle_for(stream);
    std::lock_guard<std::mutex> lk(h.mu);
    const bool tf32 = std::is_same<T, float>::value && matmul_allow_tf32();
    check_cublas(cublasSetMathMode(h.handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                  : CUBLAS_DEFAULT_MATH),
                 "cublasSetMathMode", stream);
    const T one = 1, beta = has_bias ? T(1) : T(0);
    // Row-major C = A B as column-major C^T = B^T A^T.
    check_cublas(gemm<T>(h.handle, b.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                         a.trans ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(c.cols),
                         static_cast<int>(c.rows), static_cast<int>(a.cols), &one, pb, b.ld,
                         stride_b, pa, a.ld, stride_a, &beta, dst, c.ld, stride_c,
                         static_cast<int>(batch)),
                 std::is_same<T, float>::value ? "cublasSgemmStridedBatched"
                                               : "cublasDgemmStridedBatched",
                 stream);
  }
  if (c.packed) copy(stream, dt, dt, pack_layout(c, batch, true), out, dst);
}

}  // namespace

void matmul(const Stream& stream, const cpu::MatmulPlan& p, void* out, DType dt) {
  if (dt == DType::kFloat32) {
    run<float>(stream, p, out, dt);
  } else {
    run<double>(stream, p, out, dt);
  }
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

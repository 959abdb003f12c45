// cuBLAS of the interpreted CUDA device (include/cublas_v2.h): handles, validation as the
// cuBLAS documentation states it, and strided-batched gemm through OpenBLAS on the
// handle's emulated stream (16-bit operands widened to float first).
#include <cblas.h>
#include <cublas_v2.h>
#include <cudaemu_runtime.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "runtime/base/half.h"
#include "runtime/cudaemu/live_set.h"

struct cublasContext {
  std::mutex mu;  // guards the fields below
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace streamgrad {
namespace cudaemu {
namespace {

LiveSet<cublasContext>& handles() {
  static auto* live = new LiveSet<cublasContext>();  // never destroyed: used at exit
  return *live;
}

bool valid_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

int at_least_one(int v) { return v < 1 ? 1 : v; }

// Whether [p, p + bytes) starts and ends in device memory of one device.
bool is_device_range(const void* p, size_t bytes) {
  cudaPointerAttributes first, last;
  const char* end = static_cast<const char*>(p) + bytes - 1;
  if (cudaPointerGetAttributes(&first, p) != cudaSuccess ||
      cudaPointerGetAttributes(&last, end) != cudaSuccess) {
    return false;
  }
  return first.type == cudaMemoryTypeDevice && last.type == cudaMemoryTypeDevice &&
         first.device == last.device;
}

void blas_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float* c, int ldc) {
  cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
              n, k, alpha, a, lda, b, ldb, 1.0f, c, ldc);
}

void blas_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double* c, int ldc) {
  cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
              n, k, alpha, a, lda, b, ldb, 1.0, c, ldc);
}

// C = alpha op(A) op(B) + beta C for each member of the batch, column-major. C is scaled
// here so that beta == 0 overwrites it without reading it (NaN there stays out), as
// cuBLAS promises; the product is then added with beta = 1.
template <typename T>
void gemm_batch(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, int lda,
                long long sa, const T* b, int ldb, long long sb, T beta, T* c, int ldc,
                long long sc, int batch) {
  for (int i = 0; i < batch; ++i) {
    T* ci = c + i * sc;
    for (int col = 0; col < n; ++col) {
      T* column = ci + static_cast<long long>(col) * ldc;
      if (beta == T(0)) {
        for (int row = 0; row < m; ++row) column[row] = T(0);
      } else if (beta != T(1)) {
        for (int row = 0; row < m; ++row) column[row] *= beta;
      }
    }
    if (k == 0 || alpha == T(0)) continue;
    blas_gemm(ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, ci, ldc);
  }
}

// What cuBLAS checks before a strided-batched gemm enqueues anything: CUBLAS_STATUS_SUCCESS
// to go on (a product with nothing to compute included: `empty` is then set).
cublasStatus_t check_gemm(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb,
                          int m, int n, int k, const void* alpha, const void* a, int lda,
                          const void* b, int ldb, const void* beta, const void* c, int ldc,
                          int batch, bool* empty) {
  if (!handles().contains(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!valid_op(transa) || !valid_op(transb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  if (lda < at_least_one(ta ? k : m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < at_least_one(tb ? n : k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < at_least_one(m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *empty = m == 0 || n == 0 || batch == 0;
  if (*empty) return CUBLAS_STATUS_SUCCESS;
  if (c == nullptr || (k > 0 && (a == nullptr || b == nullptr))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// Enqueues `work` on h's stream as the handle holds it now.
template <typename Work>
cublasStatus_t enqueue_gemm(cublasHandle_t h, const char* what, Work work) {
  cudaStream_t stream;
  {
    std::lock_guard<std::mutex> lk(h->mu);
    stream = h->stream;
  }
  const cudaError_t err = enqueue_on_stream(stream, what, work);
  return err == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

template <typename T>
cublasStatus_t gemm_strided_batched(const char* what, cublasHandle_t h, cublasOperation_t transa,
                                    cublasOperation_t transb, int m, int n, int k,
                                    const T* alpha, const T* a, int lda, long long sa,
                                    const T* b, int ldb, long long sb, const T* beta, T* c,
                                    int ldc, long long sc, int batch) {
  bool empty = false;
  const cublasStatus_t st =
      check_gemm(h, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch, &empty);
  if (st != CUBLAS_STATUS_SUCCESS || empty) return st;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  const T al = *alpha, be = *beta;  // host pointer mode: read now, as cuBLAS does
  return enqueue_gemm(h, what, [=] {
    gemm_batch<T>(ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc, batch);
  });
}

// The elements a column-major rows x cols matrix with leading dimension ld spans.
size_t span(int rows, int cols, int ld) {
  return rows == 0 || cols == 0 ? 0 : static_cast<size_t>(ld) * (cols - 1) + rows;
}

// `count` 16-bit elements of type t from element `first` of p, as floats.
void widen(cudaDataType t, const void* p, long long first, size_t count, std::vector<float>* out) {
  out->resize(count);
  for (size_t i = 0; i < count; ++i) {
    const long long at = first + static_cast<long long>(i);
    (*out)[i] = t == CUDA_R_16F ? static_cast<const Half*>(p)[at].to_float()
                                : static_cast<const BFloat16*>(p)[at].to_float();
  }
}

// The 16-bit gemm of cublasGemmStridedBatchedEx: each member's A and B (and a 16-bit C that
// beta reads) widened to float, multiplied by OpenBLAS in float, and a 16-bit C's m x n
// elements rounded once from the float sums (the gaps between its columns untouched).
void gemm_ex_batch(bool ta, bool tb, int m, int n, int k, float alpha, const void* a,
                   cudaDataType ab, int lda, long long sa, const void* b, int ldb,
                   long long sb, float beta, void* c, cudaDataType ct, int ldc, long long sc,
                   int batch) {
  const size_t a_span = span(ta ? k : m, ta ? m : k, lda);
  const size_t b_span = span(tb ? n : k, tb ? k : n, ldb);
  const size_t c_span = span(m, n, ldc);
  std::vector<float> fa, fb, fc;
  for (int i = 0; i < batch; ++i) {
    widen(ab, a, i * sa, a_span, &fa);
    widen(ab, b, i * sb, b_span, &fb);
    float* ci = nullptr;
    if (ct == CUDA_R_32F) {
      ci = static_cast<float*>(c) + i * sc;
    } else if (beta == 0.0f) {
      fc.assign(c_span, 0.0f);  // beta == 0 never reads C
      ci = fc.data();
    } else {
      widen(ct, c, i * sc, c_span, &fc);
      ci = fc.data();
    }
    gemm_batch<float>(ta, tb, m, n, k, alpha, fa.data(), lda, 0, fb.data(), ldb, 0, beta, ci,
                      ldc, 0, 1);
    if (ct == CUDA_R_32F) continue;
    for (int col = 0; col < n; ++col) {
      for (int row = 0; row < m; ++row) {
        const long long at = i * sc + static_cast<long long>(col) * ldc + row;
        const float v = fc[static_cast<size_t>(col) * ldc + row];
        if (ct == CUDA_R_16F) {
          static_cast<Half*>(c)[at] = Half::from_float(v);
        } else {
          static_cast<BFloat16*>(c)[at] = BFloat16::from_float(v);
        }
      }
    }
  }
}

}  // namespace
}  // namespace cudaemu
}  // namespace streamgrad

using streamgrad::cudaemu::handles;

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int device = 0;
  // cuBLAS binds the handle to the current device; no device, no handle.
  if (cudaGetDevice(&device) != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
  cublasContext* h = new (std::nothrow) cublasContext();
  if (h == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  handles().add(h);
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handles().remove(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;  // work already enqueued holds no reference to it
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId) {
  if (!handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lk(handle->mu);
  handle->stream = streamId;
  // As documented: setting the stream returns the handle to the default workspace pool.
  handle->workspace = nullptr;
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* streamId) {
  if (!handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  std::lock_guard<std::mutex> lk(handle->mu);
  *streamId = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace,
                                  size_t workspaceSizeInBytes) {
  if (!handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace == nullptr && workspaceSizeInBytes != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (workspace != nullptr && workspaceSizeInBytes != 0 &&
      !streamgrad::cudaemu::is_device_range(workspace, workspaceSizeInBytes)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lk(handle->mu);
  handle->workspace = workspace;
  handle->workspace_bytes = workspaceSizeInBytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const int base = static_cast<int>(mode) & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base < CUBLAS_DEFAULT_MATH || base > CUBLAS_TF32_TENSOR_OP_MATH) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lk(handle->mu);
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  std::lock_guard<std::mutex> lk(handle->mu);
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb,
                                         long long int strideB, const float* beta, float* C,
                                         int ldc, long long int strideC, int batchCount) {
  return streamgrad::cudaemu::gemm_strided_batched<float>(
      "cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda, strideA, B,
      ldb, strideB, beta, C, ldc, strideC, batchCount);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double* alpha, const double* A, int lda,
                                         long long int strideA, const double* B, int ldb,
                                         long long int strideB, const double* beta, double* C,
                                         int ldc, long long int strideC, int batchCount) {
  return streamgrad::cudaemu::gemm_strided_batched<double>(
      "cublasDgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda, strideA, B,
      ldb, strideB, beta, C, ldc, strideC, batchCount);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void* beta, void* C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo) {
  (void)algo;
  bool empty = false;
  const cublasStatus_t st = streamgrad::cudaemu::check_gemm(
      handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batchCount, &empty);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const bool sixteen = Atype == CUDA_R_16F || Atype == CUDA_R_16BF;
  if (!sixteen || Btype != Atype || (Ctype != Atype && Ctype != CUDA_R_32F) ||
      (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (empty) return CUBLAS_STATUS_SUCCESS;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  // Host pointer mode, compute type 32F: alpha and beta are floats, read now.
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  return streamgrad::cudaemu::enqueue_gemm(handle, "cublasGemmStridedBatchedEx", [=] {
    streamgrad::cudaemu::gemm_ex_batch(ta, tb, m, n, k, al, A, Atype, lda, strideA, B, ldb,
                                       strideB, be, C, Ctype, ldc, strideC, batchCount);
  });
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the call succeeded";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the handle is not a live cuBLAS handle";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate host memory";
    case CUBLAS_STATUS_INVALID_VALUE: return "an argument is out of its documented range";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the device lacks a feature the call needs";
    case CUBLAS_STATUS_MAPPING_ERROR: return "device memory could not be accessed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the work could not be put on the stream";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal cuBLAS operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested configuration is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the license check failed";
  }
  return "an unknown cuBLAS status";
}

}  // extern "C"

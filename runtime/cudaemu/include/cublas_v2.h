// <cublas_v2.h> of the interpreted CUDA device (issue 27): the cuBLAS calls streamgrad makes
// (kernels/cuda/matmul.cu), with the library's names, enum values and signatures, computed
// on the CPU (OpenBLAS, column-major) on the handle's emulated stream.
//
// Offers: cublasStatus_t, cublasOperation_t, cublasMath_t; cublasCreate / cublasDestroy,
// cublasSetStream / cublasGetStream, cublasSetWorkspace, cublasSetMathMode /
// cublasGetMathMode; cublasSgemmStridedBatched, cublasDgemmStridedBatched (host pointer
// mode: alpha and beta are read during the call); cublasGemmStridedBatchedEx for float16
// or bfloat16 A and B summed in float32 (CUBLAS_COMPUTE_32F, alpha and beta floats) into a
// C of their type or float32, with cudaDataType_t, cublasComputeType_t and
// cublasGemmAlgo_t; cublasGetStatusName / String.
//
// Validation follows the cuBLAS documentation: an unknown or destroyed handle answers
// CUBLAS_STATUS_NOT_INITIALIZED; a bad transpose, negative m, n, k or batch count, or a
// leading dimension below its minimum (lda >= max(1, m) for op(A) = A, else max(1, k);
// ldb >= max(1, k) for op(B) = B, else max(1, n); ldc >= max(1, m)) answers
// CUBLAS_STATUS_INVALID_VALUE, and nothing is enqueued. beta == 0 never reads C.
//
// Where the emulation deliberately differs from cuBLAS:
//   - handles are checked against the live ones, so a destroyed handle is refused, not
//     undefined behaviour; null alpha / beta, and null A, B or C of a non-empty product,
//     answer CUBLAS_STATUS_INVALID_VALUE instead of faulting.
//   - cublasSetWorkspace also refuses (INVALID_VALUE) a workspace whose first or last byte
//     is not device memory (of one device), and a null one with a non-zero size. The
//     workspace is remembered but never used: gemm needs none here.
//   - math modes are accepted and remembered but do not change the arithmetic: float
//     products are computed in float (no TF32 rounding), as CUBLAS_DEFAULT_MATH does.
//   - CUBLAS_OP_C equals CUBLAS_OP_T (real data); CUBLAS_OP_CONJG is refused.
//   - cublasGemmStridedBatchedEx takes only the combinations above (A and B both
//     CUDA_R_16F or both CUDA_R_16BF, C of that type or CUDA_R_32F, CUBLAS_COMPUTE_32F or
//     _32F_FAST_TF32) and answers CUBLAS_STATUS_NOT_SUPPORTED for any other, where cuBLAS
//     takes more; the algorithm is accepted and ignored. Each product is summed in float
//     and rounded once into a 16-bit C, as cuBLAS's 32F compute type does.
//   - work is enqueued on the stream as the handle holds it at the call; a failed enqueue
//     (destroyed stream, sticky device error) answers CUBLAS_STATUS_EXECUTION_FAILED.
//
// Thread-safety: any host thread; one handle may even be used by several threads at once
// (cuBLAS asks callers not to). Failure: every function returns a status, never throws.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUBLAS_V2_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUBLAS_V2_H_

#include <cstddef>

#include "cuda_runtime_api.h"

#define CUBLAS_VER_MAJOR 12
#define CUBLAS_VER_MINOR 8
#define CUBLAS_VER_PATCH 0

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
} cublasStatus_t;

typedef enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3,
} cublasOperation_t;

typedef enum {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
} cublasMath_t;

typedef enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
} cudaDataType;
typedef enum {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
} cublasComputeType_t;
typedef enum {
  CUBLAS_GEMM_DEFAULT = -1,
  CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
} cublasGemmAlgo_t;

typedef struct cublasContext* cublasHandle_t;

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* streamId);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace,
                                  size_t workspaceSizeInBytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb,
                                         long long int strideB, const float* beta, float* C,
                                         int ldc, long long int strideC, int batchCount);
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double* alpha, const double* A, int lda,
                                         long long int strideA, const double* B, int ldb,
                                         long long int strideB, const double* beta, double* C,
                                         int ldc, long long int strideC, int batchCount);

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void* beta, void* C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo);

const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

}  // extern "C"

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUBLAS_V2_H_

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
const void* operand(const Stream& stream, const cpu::Mat& m, int64_t batch, DType dt,
                    Storage* scratch, long long* batch_stride) {
  if (!m.packed) {
    *batch_stride = m.batch_stride;
    return m.base;
  }
  const int64_t n = distinct(m, batch);
  *scratch = Storage::allocate(static_cast<size_t>(n * m.rows * m.cols) * element_size(dt),
                               stream);
  copy(stream, dt, dt, pack_layout(m, n, false), scratch->data(), m.base);
  *batch_stride = n == 1 ? 0 : m.rows * m.cols;
  return scratch->data();
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kFloat16: return CUDA_R_16F;
    case DType::kBFloat16: return CUDA_R_16BF;
    case DType::kFloat64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

// The column-major gemm C = op(A) op(B) (+ C where beta is 1) of one plan: float32 and
// float64 through their own routines, TF32 where allowed; 16-bit A and B through
// cublasGemmStridedBatchedEx, summed in float32 (CUBLAS_COMPUTE_32F, with the reduced-
// precision reductions that cuBLAS allows a 16-bit output otherwise turned off) and rounded
// once into a C of their type, or kept in a float32 C: the values of widening them to
// float32 first, up to the order of the sums.
struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k;
  const void* a;
  int lda;
  long long sa;
  const void* b;
  int ldb;
  long long sb;
  bool accumulate;  // beta = 1
  void* c;
  int ldc;
  long long sc;
  int batch;
};

void gemm(const Stream& stream, cublasHandle_t h, const Gemm& g, DType ab, DType out) {
  if (ab == DType::kFloat32 || ab == DType::kFloat64) {
    const bool f32 = ab == DType::kFloat32;
    const bool tf32 = f32 && matmul_allow_tf32();
    check_cublas(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                 "cublasSetMathMode", stream);
    if (f32) {
      const float one = 1, beta = g.accumulate ? 1.0f : 0.0f;
      check_cublas(cublasSgemmStridedBatched(
                       h, g.ta, g.tb, g.m, g.n, g.k, &one, static_cast<const float*>(g.a), g.lda,
                       g.sa, static_cast<const float*>(g.b), g.ldb, g.sb, &beta,
                       static_cast<float*>(g.c), g.ldc, g.sc, g.batch),
                   "cublasSgemmStridedBatched", stream);
    } else {
      const double one = 1, beta = g.accumulate ? 1.0 : 0.0;
      check_cublas(cublasDgemmStridedBatched(
                       h, g.ta, g.tb, g.m, g.n, g.k, &one, static_cast<const double*>(g.a),
                       g.lda, g.sa, static_cast<const double*>(g.b), g.ldb, g.sb, &beta,
                       static_cast<double*>(g.c), g.ldc, g.sc, g.batch),
                   "cublasDgemmStridedBatched", stream);
    }
    return;
  }
  // Without the flag cuBLAS may reduce split sums in the output's 16-bit type.
  check_cublas(cublasSetMathMode(h, static_cast<cublasMath_t>(
                                        CUBLAS_DEFAULT_MATH |
                                        CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
               "cublasSetMathMode", stream);
  const float one = 1, beta = g.accumulate ? 1.0f : 0.0f;
  check_cublas(cublasGemmStridedBatchedEx(h, g.ta, g.tb, g.m, g.n, g.k, &one, g.a, cuda_type(ab),
                                          g.lda, g.sa, g.b, cuda_type(ab), g.ldb, g.sb, &beta,
                                          g.c, cuda_type(out), g.ldc, g.sc, g.batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx", stream);
}

// out = a b (+ bias): a and b of dtype `ab`, out (and the bias) of `out_dt`.
void run(const Stream& stream, const cpu::MatmulPlan& p, void* out, DType out_dt, DType ab) {
  const cpu::Mat &a = p.a, &b = p.b, &c = p.c;
  const int64_t batch = p.batch;
  Storage sa, sb, sc;
  long long stride_a = 0, stride_b = 0;
  const void* pa = operand(stream, a, batch, ab, &sa, &stride_a);
  const void* pb = operand(stream, b, batch, ab, &sb, &stride_b);
  // The gemm's C: out itself, or contiguous scratch copied back at the end.
  void* dst = out;
  long long stride_c = c.batch_stride;
  if (c.packed) {
    sc = Storage::allocate(static_cast<size_t>(batch * c.rows * c.cols) * element_size(out_dt),
                           stream);
    dst = sc.data();
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
      copy(stream, out_dt, out_dt, cpu::make_layout<2>(sizes, {dst_strides, bias_strides}),
           dst, p.bias.data);
    } else {
      fill(stream, out_dt, cpu::make_layout<1>(sizes, {dst_strides}), dst, 0.0);
    }
  }
  if (a.cols != 0) {
    Handle& h = handle_for(stream);
    std::lock_guard<std::mutex> lk(h.mu);
    // Row-major C = A B as column-major C^T = B^T A^T.
    const Gemm g{b.trans ? CUBLAS_OP_T : CUBLAS_OP_N, a.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                 static_cast<int>(c.cols), static_cast<int>(c.rows), static_cast<int>(a.cols),
                 pb, b.ld, stride_b, pa, a.ld, stride_a, has_bias, dst, c.ld, stride_c,
                 static_cast<int>(batch)};
    gemm(stream, h.handle, g, ab, out_dt);
  }
  if (c.packed) copy(stream, out_dt, out_dt, pack_layout(c, batch, true), out, dst);
}

}  // namespace

void matmul(const Stream& stream, const cpu::MatmulPlan& p, void* out, DType dt) {
  run(stream, p, out, dt, p.ab_dtype);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

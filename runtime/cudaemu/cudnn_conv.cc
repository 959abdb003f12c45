// The cuDNN stand-in's algorithm queries, workspace sizes and the three convolutions,
// enqueued on the handle's stream (include/cudnn.h).
#include <cudaemu_runtime.h>

#include <cstring>

#include "runtime/cudaemu/cudnn_internal.h"

namespace streamgrad {
namespace cudaemu {
namespace dnn {
namespace {

enum class Pass { kForward, kBackwardData, kBackwardFilter };

struct Algo {
  int algo;
  bool offered;  // computed by the emulation; otherwise listed as NOT_SUPPORTED
  bool deterministic;
};

// Each pass's algorithms in the order the _v7 queries rank them, all of the enum.
constexpr Algo kForwardAlgos[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, true},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, true, true},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, true, true},
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, false, true},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, false, true},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, false, true},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, false, true},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, false, true},
};
constexpr Algo kBackwardDataAlgos[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, true, false},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, true},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, false, true},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, false, true},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, false, true},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, false, true},
};
constexpr Algo kBackwardFilterAlgos[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, true, false},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, true},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, true, false},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, false, true},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, false, true},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, false, true},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, false, true},
};
static_assert(sizeof(kForwardAlgos) / sizeof(Algo) == CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "");
static_assert(sizeof(kBackwardDataAlgos) / sizeof(Algo) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
              "");
static_assert(sizeof(kBackwardFilterAlgos) / sizeof(Algo) ==
                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
              "");

const Algo* algos(Pass pass, int* count) {
  switch (pass) {
    case Pass::kForward:
      *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
      return kForwardAlgos;
    case Pass::kBackwardData:
      *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
      return kBackwardDataAlgos;
    case Pass::kBackwardFilter:
      break;
  }
  *count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  return kBackwardFilterAlgos;
}

// The algorithm's entry: BAD_PARAM out of the enum's range, NOT_SUPPORTED if not offered.
cudnnStatus_t find(Pass pass, int algo, Algo* out) {
  int count = 0;
  const Algo* all = algos(pass, &count);
  if (algo < 0 || algo >= count) return CUDNN_STATUS_BAD_PARAM;
  for (int i = 0; i < count; ++i) {
    if (all[i].algo == algo) *out = all[i];
  }
  return out->offered ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
}

// Fake sizes, in the spirit of what the real algorithms keep (an im2col buffer, index
// tables, partial sums), so that callers must query and pass a workspace.
size_t workspace_bytes(Pass pass, int algo, const ConvGeom& g) {
  const size_t elem = g.type == CUDNN_DATA_DOUBLE ? 8 : 4;
  const size_t columns = size_t(g.cpg) * g.kh * g.kw * g.oh * g.ow * elem;
  switch (pass) {
    case Pass::kForward:
      if (algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
        return size_t(g.cpg) * g.kh * g.kw * sizeof(int) * 2;
      }
      return algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM ? columns : 0;
    case Pass::kBackwardData:
      return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 ? columns : 0;
    case Pass::kBackwardFilter:
      if (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1) return columns;
      return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 ? size_t(g.k) * g.cpg * g.kh * g.kw * elem
                                                          : 0;
  }
  return 0;
}

template <typename Perf, typename AlgoEnum>
cudnnStatus_t rank(Pass pass, cudnnHandle_t handle, cudnnTensorDescriptor_t image,
                   cudnnFilterDescriptor_t filter, cudnnConvolutionDescriptor_t conv,
                   cudnnTensorDescriptor_t result, int requested, int* returned, Perf* perf) {
  if (!handles().contains(handle)) return CUDNN_STATUS_BAD_PARAM;
  if (requested < 1 || returned == nullptr || perf == nullptr) return CUDNN_STATUS_BAD_PARAM;
  ConvGeom g;
  const cudnnStatus_t st = problem(image, filter, conv, result, &g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  int count = 0;
  const Algo* all = algos(pass, &count);
  *returned = requested < count ? requested : count;
  for (int i = 0; i < *returned; ++i) {
    Perf p;
    std::memset(&p, 0, sizeof(p));
    p.algo = static_cast<AlgoEnum>(all[i].algo);
    p.status = all[i].offered ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    p.time = -1.0f;
    p.memory = all[i].offered ? workspace_bytes(pass, all[i].algo, g) : 0;
    p.determinism = all[i].deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    p.mathType = g.math;
    perf[i] = p;
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t size_of(Pass pass, cudnnHandle_t handle, cudnnTensorDescriptor_t image,
                      cudnnFilterDescriptor_t filter, cudnnConvolutionDescriptor_t conv,
                      cudnnTensorDescriptor_t result, int algo, size_t* bytes) {
  if (!handles().contains(handle) || bytes == nullptr) return CUDNN_STATUS_BAD_PARAM;
  ConvGeom g;
  cudnnStatus_t st = problem(image, filter, conv, result, &g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  Algo a{};
  if ((st = find(pass, algo, &a)) != CUDNN_STATUS_SUCCESS) return st;
  *bytes = workspace_bytes(pass, algo, g);
  return CUDNN_STATUS_SUCCESS;
}

template <typename T>
void compute(Pass pass, const ConvGeom& g, void* out, const void* in1, const void* in2,
             double alpha, double beta) {
  T* o = static_cast<T*>(out);
  const T* a = static_cast<const T*>(in1);
  const T* b = static_cast<const T*>(in2);
  const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
  switch (pass) {
    case Pass::kForward:
      return forward<T>(g, a, b, o, al, be);  // in1 = x, in2 = w
    case Pass::kBackwardData:
      return backward_data<T>(g, a, b, o, al, be);  // in1 = w, in2 = dy
    case Pass::kBackwardFilter:
      return backward_filter<T>(g, a, b, o, al, be);  // in1 = x, in2 = dy
  }
}

cudnnStatus_t run(Pass pass, const char* what, cudnnHandle_t handle, const void* alpha,
                  cudnnTensorDescriptor_t image, cudnnFilterDescriptor_t filter,
                  cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t result, int algo,
                  void* workspace, size_t workspace_size, const void* beta, void* out,
                  const void* in1, const void* in2) {
  if (!handles().contains(handle)) return CUDNN_STATUS_BAD_PARAM;
  ConvGeom g;
  cudnnStatus_t st = problem(image, filter, conv, result, &g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  Algo a{};
  if ((st = find(pass, algo, &a)) != CUDNN_STATUS_SUCCESS) return st;
  if (alpha == nullptr || beta == nullptr || out == nullptr || in1 == nullptr ||
      in2 == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  const size_t needed = workspace_bytes(pass, algo, g);
  if (workspace_size < needed || (needed > 0 && workspace == nullptr)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  const bool is_double = g.type == CUDNN_DATA_DOUBLE;
  // Scaling factors are host values of the compute type, read now.
  const double al = is_double ? *static_cast<const double*>(alpha)
                              : *static_cast<const float*>(alpha);
  const double be = is_double ? *static_cast<const double*>(beta)
                              : *static_cast<const float*>(beta);
  cudaStream_t stream;
  {
    std::lock_guard<std::mutex> lk(handle->mu);
    stream = handle->stream;
  }
  const cudaError_t err = enqueue_on_stream(stream, what, [=] {
    // The algorithm owns its workspace while it runs: scribble over it, so that a caller
    // who shares it with other work, or passes less than it claims, finds out.
    if (needed > 0) std::memset(workspace, 0xA5, needed);
    if (is_double) {
      compute<double>(pass, g, out, in1, in2, al, be);
    } else {
      compute<float>(pass, g, out, in1, in2, al, be);
    }
  });
  return err == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

}  // namespace
}  // namespace dnn
}  // namespace cudaemu
}  // namespace streamgrad

namespace dnn = streamgrad::cudaemu::dnn;
using dnn::Pass;

extern "C" {

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return dnn::rank<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      Pass::kForward, handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount,
      returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return dnn::rank<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      Pass::kBackwardData, handle, gradDesc, filterDesc, convDesc, diffDesc, requestedAlgoCount,
      returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return dnn::rank<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      Pass::kBackwardFilter, handle, srcDesc, gradDesc, convDesc, diffDesc, requestedAlgoCount,
      returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return dnn::size_of(Pass::kForward, handle, xDesc, wDesc, convDesc, yDesc, algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, cudnnConvolutionBwdDataAlgo_t algo,
    size_t* sizeInBytes) {
  return dnn::size_of(Pass::kBackwardData, handle, dxDesc, wDesc, convDesc, dyDesc, algo,
                      sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, cudnnConvolutionBwdFilterAlgo_t algo,
    size_t* sizeInBytes) {
  return dnn::size_of(Pass::kBackwardFilter, handle, xDesc, gradDesc, convDesc, dyDesc, algo,
                      sizeInBytes);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void* x,
                                      const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void* workSpace,
                                      size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  return dnn::run(Pass::kForward, "cudnnConvolutionForward", handle, alpha, xDesc, wDesc,
                  convDesc, yDesc, algo, workSpace, workSpaceSizeInBytes, beta, y, x, w);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void* w,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  return dnn::run(Pass::kBackwardData, "cudnnConvolutionBackwardData", handle, alpha, dxDesc,
                  wDesc, convDesc, dyDesc, algo, workSpace, workSpaceSizeInBytes, beta, dx, w,
                  dy);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void* x,
                                             const cudnnTensorDescriptor_t dyDesc,
                                             const void* dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                             void* workSpace, size_t workSpaceSizeInBytes,
                                             const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw) {
  return dnn::run(Pass::kBackwardFilter, "cudnnConvolutionBackwardFilter", handle, alpha, xDesc,
                  dwDesc, convDesc, dyDesc, algo, workSpace, workSpaceSizeInBytes, beta, dw, x,
                  dy);
}

}  // extern "C"

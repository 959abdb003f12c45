// cuDNN of the interpreted CUDA device (//runtime/cudaemu:cudnn): statuses, descriptor and
// argument validation, output dims, algorithm queries and workspace sizes. The
// convolutions' results are in cudnn_conv_test.cc.
#include <string>
#include <vector>

#include "tests/runtime/cudaemu/cudnn_test_util.h"

namespace streamgrad {
namespace cudaemu_test {
namespace {

TEST_CASE("cudnn: status values and strings", "[cudnn]") {
  CHECK(CUDNN_STATUS_BAD_PARAM == 2000);
  CHECK(CUDNN_STATUS_NOT_SUPPORTED == 3000);
  CHECK(CUDNN_CONVOLUTION_FWD_ALGO_COUNT == 8);
  CHECK(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT == 6);
  CHECK(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT == 7);
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)).find("CUDNN_STATUS_BAD_PARAM") ==
        0);
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_SUCCESS)).find("SUCCESS") !=
        std::string::npos);
  CHECK(std::string(cudnnGetErrorString(static_cast<cudnnStatus_t>(7))).find("UNKNOWN") !=
        std::string::npos);
}

TEST_CASE("cudnn: handles", "[cudnn]") {
  Fresh fresh;
  CHECK(cudnnCreate(nullptr) == CUDNN_STATUS_BAD_PARAM);
  cudnnHandle_t h = nullptr;
  DNN_OK(cudnnCreate(&h));
  cudaStream_t s = nullptr, got = nullptr;
  CUDA_OK(cudaStreamCreate(&s));
  DNN_OK(cudnnSetStream(h, s));
  DNN_OK(cudnnGetStream(h, &got));
  CHECK(got == s);
  DNN_OK(cudnnDestroy(h));
  CHECK(cudnnDestroy(h) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetStream(h, s) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetStream(nullptr, s) == CUDNN_STATUS_BAD_PARAM);
  CUDA_OK(cudaStreamDestroy(s));
}

TEST_CASE("cudnn: descriptors refuse bad values", "[cudnn]") {
  Fresh fresh;
  cudnnTensorDescriptor_t t = nullptr;
  cudnnFilterDescriptor_t f = nullptr;
  cudnnConvolutionDescriptor_t c = nullptr;
  CHECK(cudnnCreateTensorDescriptor(nullptr) == CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnCreateTensorDescriptor(&t));
  DNN_OK(cudnnCreateFilterDescriptor(&f));
  DNN_OK(cudnnCreateConvolutionDescriptor(&c));
  const auto F = CUDNN_DATA_FLOAT;
  const auto NCHW = CUDNN_TENSOR_NCHW;
  DNN_OK(cudnnSetTensor4dDescriptor(t, NCHW, F, 1, 2, 3, 4));
  CHECK(cudnnSetTensor4dDescriptor(t, NCHW, F, 0, 2, 3, 4) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetTensor4dDescriptor(t, NCHW, F, 1, -2, 3, 4) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetTensor4dDescriptor(t, NCHW, F, 1, 2, 0, 4) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetTensor4dDescriptor(t, NCHW, F, 1, 2, 3, 0) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetTensor4dDescriptor(t, static_cast<cudnnTensorFormat_t>(5), F, 1, 2, 3, 4) ==
        CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetTensor4dDescriptor(t, NCHW, static_cast<cudnnDataType_t>(99), 1, 2, 3, 4) ==
        CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW_VECT_C, F, 1, 4, 3, 4) ==
        CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW_VECT_C, CUDNN_DATA_INT8x4, 1, 4, 3, 4));
  CHECK(cudnnSetTensor4dDescriptor(nullptr, NCHW, F, 1, 2, 3, 4) == CUDNN_STATUS_BAD_PARAM);

  DNN_OK(cudnnSetFilter4dDescriptor(f, F, NCHW, 2, 2, 3, 3));
  CHECK(cudnnSetFilter4dDescriptor(f, F, NCHW, 0, 2, 3, 3) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetFilter4dDescriptor(f, F, NCHW, 2, 2, 3, -1) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetFilter4dDescriptor(f, static_cast<cudnnDataType_t>(-1), NCHW, 2, 2, 3, 3) ==
        CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetFilter4dDescriptor(f, CUDNN_DATA_DOUBLE, CUDNN_TENSOR_NCHW_VECT_C, 2, 4, 3, 3) ==
        CUDNN_STATUS_BAD_PARAM);

  const auto X = CUDNN_CROSS_CORRELATION;
  DNN_OK(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, X, F));
  CHECK(cudnnSetConvolution2dDescriptor(c, -1, 0, 1, 1, 1, 1, X, F) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolution2dDescriptor(c, 0, -1, 1, 1, 1, 1, X, F) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolution2dDescriptor(c, 0, 0, 0, 1, 1, 1, X, F) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 0, 1, 1, X, F) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 0, 1, X, F) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 0, X, F) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1,
                                        static_cast<cudnnConvolutionMode_t>(2),
                                        F) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolutionGroupCount(c, 0) == CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetConvolutionGroupCount(c, 2));
  DNN_OK(cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH));
  CHECK(cudnnSetConvolutionMathType(c, static_cast<cudnnMathType_t>(4)) ==
        CUDNN_STATUS_BAD_PARAM);

  DNN_OK(cudnnDestroyConvolutionDescriptor(c));
  CHECK(cudnnSetConvolutionGroupCount(c, 1) == CUDNN_STATUS_BAD_PARAM);  // destroyed
  CHECK(cudnnDestroyConvolutionDescriptor(c) == CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnDestroyConvolutionDescriptor(nullptr));
  DNN_OK(cudnnDestroyFilterDescriptor(f));
  DNN_OK(cudnnDestroyTensorDescriptor(t));
}

TEST_CASE("cudnn: forward output dims", "[cudnn]") {
  Fresh fresh;
  Shape s;
  s.n = 2, s.c = 6, s.h = 11, s.w = 9, s.k = 4, s.kh = 3, s.kw = 2, s.groups = 2;
  s.pad_h = 2, s.pad_w = 1, s.u = 2, s.v = 3, s.dil_h = 2, s.dil_w = 1;
  Problem p(s);
  int n = 0, c = 0, h = 0, w = 0;
  DNN_OK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &h, &w));
  CHECK(n == 2);
  CHECK(c == 4);
  CHECK(h == 1 + (11 + 4 - 5) / 2);
  CHECK(w == 1 + (9 + 2 - 2) / 3);
  CHECK(h == s.oh());
  CHECK(w == s.ow());
  CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, nullptr, &w) ==
        CUDNN_STATUS_BAD_PARAM);
  // Filter channels * groups must be the image's channels.
  DNN_OK(cudnnSetConvolutionGroupCount(p.conv, 3));
  CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &h, &w) ==
        CUDNN_STATUS_BAD_PARAM);
  // Output channels a multiple of the groups: 3 groups of 2 channels, but 4 filters.
  DNN_OK(cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 2, 3, 2));
  CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &h, &w) ==
        CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 6, 2, 3, 2));
  DNN_OK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &h, &w));
  CHECK(c == 6);
  // A filter larger than the padded image.
  DNN_OK(cudnnSetConvolutionGroupCount(p.conv, 1));
  DNN_OK(cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 6, 9, 1));
  CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &h, &w) ==
        CUDNN_STATUS_BAD_PARAM);
  // Descriptors created but never set.
  cudnnTensorDescriptor_t unset = nullptr;
  DNN_OK(cudnnCreateTensorDescriptor(&unset));
  CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, unset, p.w, &n, &c, &h, &w) ==
        CUDNN_STATUS_BAD_PARAM);
  cudnnConvolutionDescriptor_t fresh_conv = nullptr;
  DNN_OK(cudnnCreateConvolutionDescriptor(&fresh_conv));
  CHECK(cudnnGetConvolution2dForwardOutputDim(fresh_conv, p.x, p.w, &n, &c, &h, &w) ==
        CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnDestroyConvolutionDescriptor(fresh_conv));
  DNN_OK(cudnnDestroyTensorDescriptor(unset));
}

Shape small_shape() {
  Shape s;
  s.n = 2, s.c = 4, s.h = 7, s.w = 6, s.k = 6, s.kh = 3, s.kw = 3, s.groups = 2, s.pad_h = 1;
  return s;
}

TEST_CASE("cudnn: algorithm rankings and workspace sizes", "[cudnn]") {
  Fresh fresh;
  Problem p(small_shape());
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  DNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(p.handle, p.x, p.w, p.conv, p.y,
                                                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                fwd));
  REQUIRE(returned == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  CHECK(fwd[0].status == CUDNN_STATUS_SUCCESS);
  CHECK(fwd[0].determinism == CUDNN_DETERMINISTIC);
  CHECK(fwd[0].memory > 0);
  CHECK(fwd[returned - 1].status == CUDNN_STATUS_NOT_SUPPORTED);
  bool seen[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
  for (int i = 0; i < returned; ++i) {
    seen[fwd[i].algo] = true;
    if (fwd[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 1;
    DNN_OK(cudnnGetConvolutionForwardWorkspaceSize(p.handle, p.x, p.w, p.conv, p.y, fwd[i].algo,
                                                   &bytes));
    CHECK(bytes == fwd[i].memory);
  }
  for (bool s : seen) CHECK(s);  // every algorithm once
  DNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(p.handle, p.x, p.w, p.conv, p.y, 2, &returned,
                                                fwd));
  CHECK(returned == 2);
  CHECK(cudnnGetConvolutionForwardAlgorithm_v7(p.handle, p.x, p.w, p.conv, p.y, 0, &returned,
                                               fwd) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnGetConvolutionForwardAlgorithm_v7(nullptr, p.x, p.w, p.conv, p.y, 8, &returned,
                                               fwd) == CUDNN_STATUS_BAD_PARAM);

  // The backward passes rank a non-deterministic algorithm first; the first deterministic
  // one needs a workspace.
  cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  DNN_OK(cudnnGetConvolutionBackwardDataAlgorithm_v7(p.handle, p.w, p.y, p.conv, p.x,
                                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                     &returned, data));
  CHECK(returned == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  CHECK(data[0].determinism == CUDNN_NON_DETERMINISTIC);
  CHECK(data[1].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
  CHECK(data[1].determinism == CUDNN_DETERMINISTIC);
  CHECK(data[1].memory > 0);
  cudnnConvolutionBwdFilterAlgoPerf_t filt[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  DNN_OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(p.handle, p.x, p.y, p.conv, p.w,
                                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                       &returned, filt));
  CHECK(returned == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  CHECK(filt[0].determinism == CUDNN_NON_DETERMINISTIC);
  CHECK(filt[1].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  CHECK(filt[1].determinism == CUDNN_DETERMINISTIC);
  size_t bytes = 0;
  DNN_OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
      p.handle, p.x, p.y, p.conv, p.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, &bytes));
  CHECK(bytes == filt[1].memory);
  DNN_OK(cudnnGetConvolutionBackwardDataWorkspaceSize(
      p.handle, p.w, p.y, p.conv, p.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &bytes));
  CHECK(bytes == data[1].memory);

  // Out of the enum: BAD_PARAM; in it but not offered: NOT_SUPPORTED.
  CHECK(cudnnGetConvolutionForwardWorkspaceSize(p.handle, p.x, p.w, p.conv, p.y,
                                                CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                &bytes) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnGetConvolutionForwardWorkspaceSize(p.handle, p.x, p.w, p.conv, p.y,
                                                CUDNN_CONVOLUTION_FWD_ALGO_FFT,
                                                &bytes) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
            p.handle, p.w, p.y, p.conv, p.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(-1),
            &bytes) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnGetConvolutionForwardWorkspaceSize(p.handle, p.x, p.w, p.conv, p.y,
                                                CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                                nullptr) == CUDNN_STATUS_BAD_PARAM);
}

TEST_CASE("cudnn: convolutions refuse bad problems before running", "[cudnn]") {
  Fresh fresh;
  const Shape s = small_shape();
  Problem p(s);
  float* x = to_device(std::vector<float>(s.image_size(), 1.0f));
  float* w = to_device(std::vector<float>(s.filter_size(), 1.0f));
  float* y = to_device(std::vector<float>(s.result_size(), 1.0f));
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
  size_t need = 0;
  DNN_OK(cudnnGetConvolutionForwardWorkspaceSize(p.handle, p.x, p.w, p.conv, p.y, algo, &need));
  REQUIRE(need > 0);
  char* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, need));
  const float one = 1, zero = 0;
  auto fwd = [&](cudnnConvolutionFwdAlgo_t a, void* space, size_t bytes) {
    return cudnnConvolutionForward(p.handle, &one, p.x, x, p.w, w, p.conv, a, space, bytes,
                                   &zero, p.y, y);
  };
  DNN_OK(fwd(algo, ws, need));
  CHECK(fwd(algo, ws, need - 1) == CUDNN_STATUS_BAD_PARAM);  // smaller than the query said
  CHECK(fwd(algo, nullptr, need) == CUDNN_STATUS_BAD_PARAM);
  DNN_OK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0));  // needs none
  CHECK(fwd(static_cast<cudnnConvolutionFwdAlgo_t>(8), ws, need) == CUDNN_STATUS_BAD_PARAM);
  CHECK(fwd(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, ws, need) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnConvolutionForward(p.handle, nullptr, p.x, x, p.w, w, p.conv, algo, ws, need,
                                &zero, p.y, y) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnConvolutionForward(p.handle, &one, p.x, nullptr, p.w, w, p.conv, algo, ws, need,
                                &zero, p.y, y) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnConvolutionForward(nullptr, &one, p.x, x, p.w, w, p.conv, algo, ws, need, &zero,
                                p.y, y) == CUDNN_STATUS_BAD_PARAM);
  // Backward passes check their workspace against their own queries.
  size_t data_need = 0, filt_need = 0;
  DNN_OK(cudnnGetConvolutionBackwardDataWorkspaceSize(
      p.handle, p.w, p.y, p.conv, p.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &data_need));
  DNN_OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
      p.handle, p.x, p.y, p.conv, p.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, &filt_need));
  REQUIRE(data_need > 0);
  REQUIRE(filt_need > 0);
  CHECK(cudnnConvolutionBackwardData(p.handle, &one, p.w, w, p.y, y, p.conv,
                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, ws, data_need - 4,
                                     &zero, p.x, x) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnConvolutionBackwardFilter(p.handle, &one, p.x, x, p.y, y, p.conv,
                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, ws, filt_need - 1,
                                       &zero, p.w, w) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnConvolutionBackwardFilter(p.handle, &one, p.x, x, p.y, y, p.conv,
                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, ws, need, &zero,
                                       p.w, w) == CUDNN_STATUS_NOT_SUPPORTED);

  // Result descriptors that do not match the convolution.
  DNN_OK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.k,
                                    s.oh() + 1, s.ow()));
  CHECK(fwd(algo, ws, need) == CUDNN_STATUS_NOT_SUPPORTED);
  DNN_OK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.k + 1,
                                    s.oh(), s.ow()));
  CHECK(fwd(algo, ws, need) == CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n + 1, s.k,
                                    s.oh(), s.ow()));
  CHECK(fwd(algo, ws, need) == CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, s.n, s.k, s.oh(),
                                    s.ow()));
  CHECK(fwd(algo, ws, need) == CUDNN_STATUS_BAD_PARAM);  // types differ
  DNN_OK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, s.n, s.k, s.oh(),
                                    s.ow()));
  CHECK(fwd(algo, ws, need) == CUDNN_STATUS_NOT_SUPPORTED);
  DNN_OK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.k, s.oh(),
                                    s.ow()));
  DNN_OK(fwd(algo, ws, need));
  // Compute type other than the data's, and half data.
  DNN_OK(cudnnSetConvolution2dDescriptor(p.conv, s.pad_h, s.pad_w, 1, 1, 1, 1,
                                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_DOUBLE));
  CHECK(fwd(algo, ws, need) == CUDNN_STATUS_NOT_SUPPORTED);
  DNN_OK(cudnnSetConvolution2dDescriptor(p.conv, s.pad_h, s.pad_w, 1, 1, 1, 1,
                                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // Groups that do not divide the image's channels by the filter's.
  DNN_OK(cudnnSetConvolutionGroupCount(p.conv, 1));
  CHECK(fwd(algo, ws, need) == CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetConvolutionGroupCount(p.conv, 2));
  DNN_OK(fwd(algo, ws, need));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(ws));
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(w));
  CUDA_OK(cudaFree(y));
}

}  // namespace
}  // namespace cudaemu_test
}  // namespace streamgrad

// cuDNN of the interpreted CUDA device: the three convolutions against their definitions
// (cudnn_test_util.h), scaling factors, the project's own call sequence, and stream order.
#include <limits>
#include <type_traits>
#include <vector>

#include "tests/runtime/cudaemu/cudnn_test_util.h"

namespace streamgrad {
namespace cudaemu_test {
namespace {

enum class Pass { kForward, kBackwardData, kBackwardFilter };

// Runs `pass` of shape s with the first deterministic offered algorithm (as
// kernels/cuda/cudnn_conv.cu picks it) and checks every element of its output against the
// definition: out = alpha * op + beta * out_before (out_before NaN when beta == 0).
template <typename T>
void check_pass(Pass pass, const Shape& s, double alpha, double beta) {
  const cudnnDataType_t type = std::is_same<T, float>::value ? CUDNN_DATA_FLOAT
                                                             : CUDNN_DATA_DOUBLE;
  Problem p(s, type);
  const std::vector<double> x = wave<double>(s.image_size(), 0.61, 0.3);
  const std::vector<double> w = wave<double>(s.filter_size(), 0.83, 1.1);
  const std::vector<double> dy = wave<double>(s.result_size(), 0.47, 2.0);
  auto as_t = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  const size_t out_size = pass == Pass::kForward        ? s.result_size()
                          : pass == Pass::kBackwardData ? s.image_size()
                                                        : s.filter_size();
  std::vector<double> before = wave<double>(out_size, 0.29, 0.7);
  if (beta == 0) before.assign(out_size, std::numeric_limits<double>::quiet_NaN());
  T* dx = to_device(as_t(pass == Pass::kBackwardData ? before : x));
  T* dw = to_device(as_t(pass == Pass::kBackwardFilter ? before : w));
  T* ddy = to_device(as_t(pass == Pass::kForward ? before : dy));
  const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
  int returned = 0;
  size_t need = 0;
  char* ws = nullptr;
  switch (pass) {
    case Pass::kForward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      DNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(p.handle, p.x, p.w, p.conv, p.y, 8,
                                                    &returned, perf));
      DNN_OK(cudnnGetConvolutionForwardWorkspaceSize(p.handle, p.x, p.w, p.conv, p.y,
                                                     perf[0].algo, &need));
      CUDA_OK(cudaMalloc(&ws, need + 1));
      DNN_OK(cudnnConvolutionForward(p.handle, &al, p.x, dx, p.w, dw, p.conv, perf[0].algo, ws,
                                     need, &be, p.y, ddy));
      break;
    }
    case Pass::kBackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      DNN_OK(cudnnGetConvolutionBackwardDataAlgorithm_v7(p.handle, p.w, p.y, p.conv, p.x, 6,
                                                         &returned, perf));
      REQUIRE(perf[1].determinism == CUDNN_DETERMINISTIC);
      DNN_OK(cudnnGetConvolutionBackwardDataWorkspaceSize(p.handle, p.w, p.y, p.conv, p.x,
                                                          perf[1].algo, &need));
      CUDA_OK(cudaMalloc(&ws, need + 1));
      DNN_OK(cudnnConvolutionBackwardData(p.handle, &al, p.w, dw, p.y, ddy, p.conv,
                                          perf[1].algo, ws, need, &be, p.x, dx));
      break;
    }
    case Pass::kBackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      DNN_OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(p.handle, p.x, p.y, p.conv, p.w, 7,
                                                           &returned, perf));
      REQUIRE(perf[1].determinism == CUDNN_DETERMINISTIC);
      DNN_OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(p.handle, p.x, p.y, p.conv, p.w,
                                                            perf[1].algo, &need));
      CUDA_OK(cudaMalloc(&ws, need + 1));
      DNN_OK(cudnnConvolutionBackwardFilter(p.handle, &al, p.x, dx, p.y, ddy, p.conv,
                                            perf[1].algo, ws, need, &be, p.w, dw));
      break;
    }
  }
  T* out = pass == Pass::kForward ? ddy : pass == Pass::kBackwardData ? dx : dw;
  const std::vector<T> got = to_host(out, out_size);
  const double tol = std::is_same<T, float>::value ? 1e-4 : 1e-11;
  size_t at = 0;
  const int d0 = pass == Pass::kBackwardFilter ? s.k : s.n;
  const int d1 = pass == Pass::kForward ? s.k : pass == Pass::kBackwardData ? s.c : s.cpg();
  const int d2 = pass == Pass::kForward ? s.oh() : pass == Pass::kBackwardData ? s.h : s.kh;
  const int d3 = pass == Pass::kForward ? s.ow() : pass == Pass::kBackwardData ? s.w : s.kw;
  for (int a = 0; a < d0; ++a) {
    for (int b = 0; b < d1; ++b) {
      for (int c = 0; c < d2; ++c) {
        for (int d = 0; d < d3; ++d, ++at) {
          const double op = pass == Pass::kForward ? naive_forward(s, x, w, a, b, c, d)
                            : pass == Pass::kBackwardData
                                ? naive_backward_data(s, w, dy, a, b, c, d)
                                : naive_backward_filter(s, x, dy, a, b, c, d);
          const double want = alpha * op + (beta == 0 ? 0.0 : beta * before[at]);
          INFO("element [" << a << ", " << b << ", " << c << ", " << d << "]");
          REQUIRE(std::abs(double(got[at]) - want) <= tol * (1 + std::abs(want)));
        }
      }
    }
  }
  CUDA_OK(cudaFree(ws));
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dw));
  CUDA_OK(cudaFree(ddy));
}

std::vector<Shape> shapes() {
  std::vector<Shape> all;
  Shape s;
  s.n = 2, s.c = 3, s.h = 5, s.w = 6, s.k = 4, s.kh = 3, s.kw = 3;
  all.push_back(s);  // plain
  s.pad_h = 1, s.pad_w = 2;
  all.push_back(s);  // padding
  s.u = 2, s.v = 2;
  all.push_back(s);  // stride 2 with padding
  Shape d;
  d.n = 1, d.c = 2, d.h = 9, d.w = 8, d.k = 3, d.kh = 3, d.kw = 2, d.dil_h = 2, d.dil_w = 3;
  d.pad_h = 2;
  all.push_back(d);  // dilation
  Shape g;
  g.n = 2, g.c = 6, g.h = 7, g.w = 5, g.k = 4, g.kh = 2, g.kw = 3, g.groups = 2, g.pad_w = 1;
  g.u = 2;
  all.push_back(g);  // groups
  g.groups = 6, g.k = 6, g.kh = 3, g.pad_h = 1, g.u = 1;
  all.push_back(g);  // depthwise
  Shape f = s;
  f.flip = true, f.kw = 2;
  all.push_back(f);  // convolution mode, asymmetric filter
  Shape one;
  one.n = 3, one.c = 2, one.h = 4, one.w = 4, one.k = 5;
  all.push_back(one);  // 1 x 1
  return all;
}

TEST_CASE("cudnn: convolutions match their definitions", "[cudnn]") {
  Fresh fresh;
  int i = 0;
  for (const Shape& s : shapes()) {
    INFO("shape " << i++);
    for (Pass pass : {Pass::kForward, Pass::kBackwardData, Pass::kBackwardFilter}) {
      INFO("pass " << static_cast<int>(pass));
      check_pass<float>(pass, s, 1.0, 0.0);
      check_pass<double>(pass, s, 1.0, 0.0);
      check_pass<double>(pass, s, -0.5, 1.5);
      check_pass<float>(pass, s, 2.0, 1.0);
    }
  }
}

TEST_CASE("cudnn: a ResNet-sized convolution runs", "[cudnn]") {
  Fresh fresh;
  Shape s;
  s.n = 4, s.c = 16, s.h = 16, s.w = 16, s.k = 32, s.kh = 3, s.kw = 3, s.pad_h = 1, s.pad_w = 1;
  for (Pass pass : {Pass::kForward, Pass::kBackwardData, Pass::kBackwardFilter}) {
    check_pass<float>(pass, s, 1.0, 0.0);
  }
}

// An image copied on one stream and the convolution on the handle's: without the wait the
// adversarial scheduler runs the convolution on the old (zero) image.
float conv_after_copy(bool same_stream, bool wait) {
  Fresh fresh;
  Shape s;  // 1 x 1 x 1 x 1 image and filter
  Problem p(s);
  cudaStream_t copy = nullptr, compute = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  DNN_OK(cudnnSetStream(p.handle, compute));
  float* x = to_device(std::vector<float>{0.0f});
  float* w = to_device(std::vector<float>{3.0f});
  float* y = to_device(std::vector<float>{0.0f});
  const float five = 5.0f, one = 1, zero = 0;
  CUDA_OK(cudaMemcpyAsync(x, &five, sizeof(float), cudaMemcpyHostToDevice,
                          same_stream ? compute : copy));
  cudaEvent_t copied = nullptr;
  CUDA_OK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  CUDA_OK(cudaEventRecord(copied, copy));
  if (wait) CUDA_OK(cudaStreamWaitEvent(compute, copied, 0));
  DNN_OK(cudnnConvolutionForward(p.handle, &one, p.x, x, p.w, w, p.conv,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero,
                                 p.y, y));
  CUDA_OK(cudaStreamSynchronize(compute));
  CUDA_OK(cudaStreamSynchronize(copy));
  const float got = to_host(y, 1)[0];
  CUDA_OK(cudaEventDestroy(copied));
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(w));
  CUDA_OK(cudaFree(y));
  CUDA_OK(cudaStreamDestroy(copy));
  CUDA_OK(cudaStreamDestroy(compute));
  return got;
}

TEST_CASE("cudnn: convolutions run in stream order", "[cudnn]") {
  CHECK(conv_after_copy(true, false) == 15.0f);
  CHECK(conv_after_copy(false, true) == 15.0f);
  CHECK(conv_after_copy(false, false) == 0.0f);  // the missing wait, made visible
}

TEST_CASE("cudnn: descriptors may be destroyed once the call returns", "[cudnn]") {
  Fresh fresh;
  Shape s;
  s.c = 2, s.h = 3, s.w = 3, s.kh = 3, s.kw = 3, s.pad_h = 1, s.pad_w = 1;
  std::vector<float> x(s.image_size(), 1.0f), w(s.filter_size(), 2.0f);
  float* dx = to_device(x);
  float* dw = to_device(w);
  float* dy = to_device(std::vector<float>(s.result_size(), 0.0f));
  const float one = 1, zero = 0;
  {
    Problem p(s);
    DNN_OK(cudnnConvolutionForward(p.handle, &one, p.x, dx, p.w, dw, p.conv,
                                   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero,
                                   p.y, dy));
  }  // the handle and descriptors are gone before the work runs
  const std::vector<float> y = to_host(dy, s.result_size());
  CHECK(y[4] == 36.0f);  // centre: 2 channels x 9 taps x 2
  CHECK(y[0] == 16.0f);  // corner: 2 channels x 4 taps x 2
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dw));
  CUDA_OK(cudaFree(dy));
}

TEST_CASE("cudnn: work for a destroyed stream is refused", "[cudnn]") {
  Fresh fresh;
  Shape s;
  Problem p(s);
  float* x = to_device(std::vector<float>{1.0f});
  cudaStream_t gone = nullptr;
  CUDA_OK(cudaStreamCreate(&gone));
  DNN_OK(cudnnSetStream(p.handle, gone));
  CUDA_OK(cudaStreamDestroy(gone));
  const float one = 1, zero = 0;
  CHECK(cudnnConvolutionForward(p.handle, &one, p.x, x, p.w, x, p.conv,
                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero, p.y,
                                x) == CUDNN_STATUS_EXECUTION_FAILED);
  (void)cudaGetLastError();
  CUDA_OK(cudaFree(x));
}

}  // namespace
}  // namespace cudaemu_test
}  // namespace streamgrad

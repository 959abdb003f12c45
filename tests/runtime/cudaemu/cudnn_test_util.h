// Helpers of the cuDNN stand-in's tests (cudnn_test.cc, cudnn_conv_test.cc): descriptors
// for one problem, device buffers, and the convolution definitions as naive loops.
//
// Thread-safety: for the test's main thread. Failure: Catch2 assertions.
#ifndef STREAMGRAD_TESTS_RUNTIME_CUDAEMU_CUDNN_TEST_UTIL_H_
#define STREAMGRAD_TESTS_RUNTIME_CUDAEMU_CUDNN_TEST_UTIL_H_

#include <cudnn.h>

#include <cmath>
#include <vector>

#include "tests/runtime/cudaemu/cudart_test_util.h"

namespace streamgrad {
namespace cudaemu_test {

#define DNN_OK(expr) REQUIRE((expr) == CUDNN_STATUS_SUCCESS)

struct Shape {
  int n = 1, c = 1, h = 1, w = 1;  // image
  int k = 1, kh = 1, kw = 1;       // filters
  int groups = 1, pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1;
  bool flip = false;  // CUDNN_CONVOLUTION
  int oh() const { return 1 + (h + 2 * pad_h - (kh - 1) * dil_h - 1) / u; }
  int ow() const { return 1 + (w + 2 * pad_w - (kw - 1) * dil_w - 1) / v; }
  int cpg() const { return c / groups; }
  size_t image_size() const { return size_t(n) * c * h * w; }
  size_t filter_size() const { return size_t(k) * cpg() * kh * kw; }
  size_t result_size() const { return size_t(n) * k * oh() * ow(); }
};

// A handle and the four descriptors of one problem, set as cudnn_conv.cu sets them.
struct Problem {
  explicit Problem(const Shape& s, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    DNN_OK(cudnnCreate(&handle));
    DNN_OK(cudnnCreateTensorDescriptor(&x));
    DNN_OK(cudnnCreateTensorDescriptor(&y));
    DNN_OK(cudnnCreateFilterDescriptor(&w));
    DNN_OK(cudnnCreateConvolutionDescriptor(&conv));
    DNN_OK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, s.n, s.c, s.h, s.w));
    DNN_OK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, type, s.n, s.k, s.oh(), s.ow()));
    DNN_OK(cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NCHW, s.k, s.cpg(), s.kh, s.kw));
    DNN_OK(cudnnSetConvolution2dDescriptor(conv, s.pad_h, s.pad_w, s.u, s.v, s.dil_h, s.dil_w,
                                           s.flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION,
                                           type));
    DNN_OK(cudnnSetConvolutionGroupCount(conv, s.groups));
  }
  ~Problem() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroy(handle);
  }
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

template <typename T>
T* to_device(const std::vector<T>& v) {
  T* p = nullptr;
  CUDA_OK(cudaMalloc(&p, v.size() * sizeof(T) + 1));  // never null, even when empty
  if (!v.empty()) {
    CUDA_OK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return p;
}

template <typename T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> v(n);
  CUDA_OK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

template <typename T>
std::vector<T> wave(size_t n, double scale, double offset) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(std::sin(scale * i + offset));
  return v;
}

// The definitions, each as a gather over the index it produces: the filter tap (i, j) of
// output (oy, ox) reads image row oy * u - pad_h + i * dil_h (zero outside), and in
// CUDNN_CONVOLUTION mode the filter is read mirrored.
inline bool tap(const Shape& s, int oy, int ox, int i, int j, int* iy, int* ix) {
  *iy = oy * s.u - s.pad_h + i * s.dil_h;
  *ix = ox * s.v - s.pad_w + j * s.dil_w;
  return *iy >= 0 && *iy < s.h && *ix >= 0 && *ix < s.w;
}

inline size_t widx(const Shape& s, int k, int ci, int i, int j) {
  if (s.flip) i = s.kh - 1 - i, j = s.kw - 1 - j;
  return ((size_t(k) * s.cpg() + ci) * s.kh + i) * s.kw + j;
}

// y[b, k, oy, ox] = sum over the group's channels and the taps of x * w.
inline double naive_forward(const Shape& s, const std::vector<double>& x,
                            const std::vector<double>& w, int b, int k, int oy, int ox) {
  const int g = k / (s.k / s.groups);
  double sum = 0;
  for (int ci = 0; ci < s.cpg(); ++ci) {
    for (int i = 0; i < s.kh; ++i) {
      for (int j = 0; j < s.kw; ++j) {
        int iy, ix;
        if (!tap(s, oy, ox, i, j, &iy, &ix)) continue;
        sum += x[((size_t(b) * s.c + g * s.cpg() + ci) * s.h + iy) * s.w + ix] *
               w[widx(s, k, ci, i, j)];
      }
    }
  }
  return sum;
}

// dx[b, c, hy, hx] = d(sum y * dy)/dx: every output and tap that read this image element,
// found by solving hy = oy * u - pad_h + i * dil_h for oy.
inline double naive_backward_data(const Shape& s, const std::vector<double>& w,
                                  const std::vector<double>& dy, int b, int c, int hy, int hx) {
  const int kpg = s.k / s.groups, g = c / s.cpg(), ci = c % s.cpg();
  double sum = 0;
  for (int k = g * kpg; k < (g + 1) * kpg; ++k) {
    for (int i = 0; i < s.kh; ++i) {
      const int ny = hy + s.pad_h - i * s.dil_h;
      if (ny < 0 || ny % s.u != 0 || ny / s.u >= s.oh()) continue;
      for (int j = 0; j < s.kw; ++j) {
        const int nx = hx + s.pad_w - j * s.dil_w;
        if (nx < 0 || nx % s.v != 0 || nx / s.v >= s.ow()) continue;
        sum += dy[((size_t(b) * s.k + k) * s.oh() + ny / s.u) * s.ow() + nx / s.v] *
               w[widx(s, k, ci, i, j)];
      }
    }
  }
  return sum;
}

// dw[k, ci, fi, fj] = sum over the batch and outputs of x at the tap times dy (fi, fj as
// stored: mirrored back in CUDNN_CONVOLUTION mode).
inline double naive_backward_filter(const Shape& s, const std::vector<double>& x,
                                    const std::vector<double>& dy, int k, int ci, int fi,
                                    int fj) {
  const int g = k / (s.k / s.groups);
  const int i = s.flip ? s.kh - 1 - fi : fi, j = s.flip ? s.kw - 1 - fj : fj;
  double sum = 0;
  for (int b = 0; b < s.n; ++b) {
    for (int oy = 0; oy < s.oh(); ++oy) {
      for (int ox = 0; ox < s.ow(); ++ox) {
        int iy, ix;
        if (!tap(s, oy, ox, i, j, &iy, &ix)) continue;
        sum += x[((size_t(b) * s.c + g * s.cpg() + ci) * s.h + iy) * s.w + ix] *
               dy[((size_t(b) * s.k + k) * s.oh() + oy) * s.ow() + ox];
      }
    }
  }
  return sum;
}

}  // namespace cudaemu_test
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_RUNTIME_CUDAEMU_CUDNN_TEST_UTIL_H_

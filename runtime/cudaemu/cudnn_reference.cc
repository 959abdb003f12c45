// The cuDNN stand-in's convolutions as reference loops (cudnn_internal.h): the definitions
// written out, in the data's type, walking the output so that the inner loops are short.
#include <cstddef>
#include <vector>

#include "runtime/cudaemu/cudnn_internal.h"

namespace streamgrad {
namespace cudaemu {
namespace dnn {
namespace {

size_t at(int n, int c, int h, int w, int C, int H, int W) {
  return ((static_cast<size_t>(n) * C + c) * H + h) * W + w;
}

template <typename T>
void blend(T* out, const std::vector<T>& sum, T alpha, T beta) {
  for (size_t i = 0; i < sum.size(); ++i) {
    out[i] = beta == T(0) ? alpha * sum[i] : alpha * sum[i] + beta * out[i];
  }
}

// Calls f(image channel, filter row, filter col, image row, image col) for every filter
// tap of output (k, oy, ox) that lands inside the image (padding contributes zeros).
template <typename F>
void taps(const ConvGeom& g, int k, int oy, int ox, F f) {
  const int group = k / g.kpg;
  for (int i = 0; i < g.kh; ++i) {
    const int iy = oy * g.u - g.pad_h + i * g.dil_h;
    if (iy < 0 || iy >= g.h) continue;
    const int fi = g.flip ? g.kh - 1 - i : i;
    for (int j = 0; j < g.kw; ++j) {
      const int ix = ox * g.v - g.pad_w + j * g.dil_w;
      if (ix < 0 || ix >= g.w) continue;
      const int fj = g.flip ? g.kw - 1 - j : j;
      for (int ci = 0; ci < g.cpg; ++ci) f(group * g.cpg + ci, ci, fi, fj, iy, ix);
    }
  }
}

// Calls f(batch, filter, output row, output col) for every output position, in order.
template <typename F>
void outputs(const ConvGeom& g, F f) {
  for (int b = 0; b < g.n; ++b) {
    for (int k = 0; k < g.k; ++k) {
      for (int oy = 0; oy < g.oh; ++oy) {
        for (int ox = 0; ox < g.ow; ++ox) f(b, k, oy, ox);
      }
    }
  }
}

}  // namespace

template <typename T>
void forward(const ConvGeom& g, const T* x, const T* w, T* y, T alpha, T beta) {
  outputs(g, [&](int b, int k, int oy, int ox) {
    T sum = 0;
    taps(g, k, oy, ox, [&](int c, int ci, int fi, int fj, int iy, int ix) {
      sum += x[at(b, c, iy, ix, g.c, g.h, g.w)] * w[at(k, ci, fi, fj, g.cpg, g.kh, g.kw)];
    });
    T& out = y[at(b, k, oy, ox, g.k, g.oh, g.ow)];
    out = beta == T(0) ? alpha * sum : alpha * sum + beta * out;
  });
}

template <typename T>
void backward_data(const ConvGeom& g, const T* w, const T* dy, T* dx, T alpha, T beta) {
  std::vector<T> sum(static_cast<size_t>(g.n) * g.c * g.h * g.w, T(0));
  outputs(g, [&](int b, int k, int oy, int ox) {
    const T d = dy[at(b, k, oy, ox, g.k, g.oh, g.ow)];
    taps(g, k, oy, ox, [&](int c, int ci, int fi, int fj, int iy, int ix) {
      sum[at(b, c, iy, ix, g.c, g.h, g.w)] += d * w[at(k, ci, fi, fj, g.cpg, g.kh, g.kw)];
    });
  });
  blend(dx, sum, alpha, beta);
}

template <typename T>
void backward_filter(const ConvGeom& g, const T* x, const T* dy, T* dw, T alpha, T beta) {
  std::vector<T> sum(static_cast<size_t>(g.k) * g.cpg * g.kh * g.kw, T(0));
  outputs(g, [&](int b, int k, int oy, int ox) {
    const T d = dy[at(b, k, oy, ox, g.k, g.oh, g.ow)];
    taps(g, k, oy, ox, [&](int c, int ci, int fi, int fj, int iy, int ix) {
      sum[at(k, ci, fi, fj, g.cpg, g.kh, g.kw)] += d * x[at(b, c, iy, ix, g.c, g.h, g.w)];
    });
  });
  blend(dw, sum, alpha, beta);
}

template void forward<float>(const ConvGeom&, const float*, const float*, float*, float, float);
template void forward<double>(const ConvGeom&, const double*, const double*, double*, double,
                              double);
template void backward_data<float>(const ConvGeom&, const float*, const float*, float*, float,
                                   float);
template void backward_data<double>(const ConvGeom&, const double*, const double*, double*,
                                    double, double);
template void backward_filter<float>(const ConvGeom&, const float*, const float*, float*, float,
                                     float);
template void backward_filter<double>(const ConvGeom&, const double*, const double*, double*,
                                      double, double);

}  // namespace dnn
}  // namespace cudaemu
}  // namespace streamgrad

// The kernels of kernels/nn_kernels.h on cuda streams (declared in kernels/cuda/cuda_kernels.h):
// im2col, col2im, max pooling each way, batch norm each way. Views are contiguous (the
// cpu entry points check), so indices are plain row-major arithmetic here.
//
// Determinism: col2im and max pooling's backward gather, one thread per image element,
// adding the contributions in the cpu's order (output position ascending), so they equal
// the cpu's bits; batch norm's per-channel sums use a block tree in a fixed order (within
// rounding of the cpu's lanes). The math of batch norm is kernels/functors/norm_ops.h, the pooling
// rule (first largest tap, first NaN) the cpu's.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/functors/norm_ops.h"
#include "kernels/window.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/kernel_launch.h"
#include "runtime/cudaemu/kernel_spellings.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

// cols [B, C * kh * kw, oh * ow] from image [B, C, H, W]; padding reads 0.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    im2col_kernel(ImageShape s, Window2d w, T* cols, const T* img) {
  const int64_t taps = w.kernel[0] * w.kernel[1], positions = s.oh * s.ow;
  const int64_t n = s.batch * s.channels * taps * positions;
  SG_GRID_LOOP(i, n) {
    const int64_t pos = i % positions, row = i / positions;
    const int64_t tap = row % taps, plane = row / taps;  // plane = b * C + c
    const int64_t ki = tap / w.kernel[1], kj = tap % w.kernel[1];
    const int64_t oi = pos / s.ow, oj = pos % s.ow;
    const int64_t ih = window_input_index(oi, ki, w.stride[0], w.padding[0], w.dilation[0]);
    const int64_t iw = window_input_index(oj, kj, w.stride[1], w.padding[1], w.dilation[1]);
    const bool inside = ih >= 0 && ih < s.height && iw >= 0 && iw < s.width;
    cols[i] = inside ? img[(plane * s.height + ih) * s.width + iw] : T(0);
  }
}

// The output position along one dim whose tap k reads input index `in`, or -1.
__device__ __forceinline__ int64_t position_of(int64_t in, int64_t k, int64_t stride,
                                               int64_t padding, int64_t dilation, int64_t out) {
  const int64_t t = in + padding - k * dilation;
  if (t < 0 || t % stride != 0) return -1;
  const int64_t o = t / stride;
  return o < out ? o : -1;
}

// image [B, C, H, W] += the columns summed back, one thread per image element, taps in
// the cpu's order (kernel row, then column: output positions ascending per tap).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    col2im_kernel(ImageShape s, Window2d w, T* img, const T* cols) {
  const int64_t taps = w.kernel[0] * w.kernel[1], positions = s.oh * s.ow;
  const int64_t n = s.batch * s.channels * s.height * s.width;
  SG_GRID_LOOP(i, n) {
    const int64_t iw = i % s.width, ih = (i / s.width) % s.height;
    const int64_t plane = i / (s.width * s.height);
    T acc = img[i];
    for (int64_t ki = 0; ki < w.kernel[0]; ++ki) {
      const int64_t oi = position_of(ih, ki, w.stride[0], w.padding[0], w.dilation[0], s.oh);
      if (oi < 0) continue;
      for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
        const int64_t oj = position_of(iw, kj, w.stride[1], w.padding[1], w.dilation[1], s.ow);
        if (oj < 0) continue;
        acc += cols[(plane * taps + ki * w.kernel[1] + kj) * positions + oi * s.ow + oj];
      }
    }
    img[i] = acc;
  }
}

// values and indices [P, oh, ow] from planes [P, H, W]: the first largest tap in window
// order, a NaN winning (the first one), padding never.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_pool_kernel(ImageShape s, Window2d w, T* values, int64_t* indices, const T* img) {
  const int64_t n = s.channels * s.oh * s.ow;  // channels holds P here
  SG_GRID_LOOP(i, n) {
    const int64_t oj = i % s.ow, oi = (i / s.ow) % s.oh, p = i / (s.ow * s.oh);
    const T* plane = img + p * s.height * s.width;
    T best = 0;
    int64_t at = -1;
    for (int64_t ki = 0; ki < w.kernel[0]; ++ki) {
      const int64_t ih = window_input_index(oi, ki, w.stride[0], w.padding[0], w.dilation[0]);
      if (ih < 0 || ih >= s.height) continue;
      for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
        const int64_t iw = window_input_index(oj, kj, w.stride[1], w.padding[1], w.dilation[1]);
        if (iw < 0 || iw >= s.width) continue;
        const T v = plane[ih * s.width + iw];
        if (at < 0 || v > best || (v != v && best == best)) {
          best = v;
          at = ih * s.width + iw;
        }
      }
    }
    values[i] = best;
    indices[i] = at;
  }
}

// grad_in [P, H, W]: the sum of grad_out over the windows whose index is this element, in
// output order (the cpu's scatter order).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_pool_backward_kernel(ImageShape s, Window2d w, T* grad_in, const T* grad_out,
                             const int64_t* indices) {
  const int64_t n = s.channels * s.height * s.width;
  SG_GRID_LOOP(i, n) {
    const int64_t at = i % (s.height * s.width), p = i / (s.height * s.width);
    const int64_t ih = at / s.width, iw = at % s.width;
    const int64_t base = p * s.oh * s.ow;
    T acc = 0;
    // Taps descending give output positions ascending.
    for (int64_t ki = w.kernel[0] - 1; ki >= 0; --ki) {
      const int64_t oi = position_of(ih, ki, w.stride[0], w.padding[0], w.dilation[0], s.oh);
      if (oi < 0) continue;
      for (int64_t kj = w.kernel[1] - 1; kj >= 0; --kj) {
        const int64_t oj = position_of(iw, kj, w.stride[1], w.padding[1], w.dilation[1], s.ow);
        if (oj < 0) continue;
        const int64_t o = base + oi * s.ow + oj;
        if (indices[o] == at) acc += grad_out[o];
      }
    }
    grad_in[i] = acc;
  }
}

// The offset of channel c's j-th value (row-major over its N rows of S) in [N, C, S].
__device__ __forceinline__ int64_t channel_at(const NcsShape& d, int64_t c, int64_t j) {
  return ((j / d.s) * d.c + c) * d.s + j % d.s;
}

// One block per channel of in [N, C, S].
// S is the data's storage type, P the statistics' and parameters' (S, or float beside
// 16-bit data); C what S computes in (indexing.cuh), A its sums' type.
template <typename S, typename P>
__global__ void __launch_bounds__(kThreads)
    batch_norm_kernel(NcsShape d, double eps, S* out, P* mean, P* var, const S* in,
                      const P* weight, const P* bias, RunningUpdate running) {
  using C = typename ComputeIn<S>::type;
  using A = typename Acc<C>::type;
  SG_SHARED_ARRAY(A, part, kThreads);
  const int64_t c = blockIdx.x, m = d.n * d.s;
  A sum = 0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    sum += A(cpu::convert<C>(in[channel_at(d, c, j)]));
  }
  const C mu = static_cast<C>(double(block_sum(sum, part)) / double(m));
  A sq = 0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const A x = A(cpu::convert<C>(in[channel_at(d, c, j)]) - mu);
    sq += x * x;
  }
  const C v = static_cast<C>(double(block_sum(sq, part)) / double(m));
  if (threadIdx.x == 0) {
    mean[c] = cpu::convert<P>(mu);
    var[c] = cpu::convert<P>(v);
    if (running.mean != nullptr) {
      // Moved in C and then stored, as the widened call's float32 kernel and its rounding
      // copy would.
      P* rm = static_cast<P*>(running.mean) + c;
      P* rv = static_cast<P*>(running.var) + c;
      const C moved_mean = static_cast<C>(running_moved(
          double(A(cpu::convert<C>(*rm))), double(A(mu)), running.momentum, 1));
      const C moved_var =
          static_cast<C>(running_moved(double(A(cpu::convert<C>(*rv))), double(A(v)),
                                       running.momentum, double(m) / double(m - 1)));
      *rm = cpu::convert<P>(moved_mean);
      *rv = cpu::convert<P>(moved_var);
    }
  }
  const BatchNormApply<C> f{mu, batch_norm_invstd(v, eps),
                            weight ? cpu::convert<C>(weight[c]) : C(1),
                            bias ? cpu::convert<C>(bias[c]) : C(0)};
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const int64_t at = channel_at(d, c, j);
    out[at] = cpu::convert<S>(f(cpu::convert<C>(in[at])));
  }
}

template <typename S, typename P>
__global__ void __launch_bounds__(kThreads)
    batch_norm_backward_kernel(NcsShape d, double eps, S* gin, P* gw, P* gb, const S* g,
                               const S* in, const P* mean, const P* var, const P* weight) {
  using C = typename ComputeIn<S>::type;
  using A = typename Acc<C>::type;
  SG_SHARED_ARRAY(A, part, kThreads);
  const int64_t c = blockIdx.x, m = d.n * d.s;
  const C mu = cpu::convert<C>(mean[c]);
  const C invstd = batch_norm_invstd(cpu::convert<C>(var[c]), eps);
  A sg = 0, sgc = 0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const int64_t at = channel_at(d, c, j);
    const C gv = cpu::convert<C>(g[at]);
    sg += A(gv);
    sgc += A(gv) * A(cpu::convert<C>(in[at]) - mu);
  }
  const double sum_g = double(block_sum(sg, part)), sum_gc = double(block_sum(sgc, part));
  if (threadIdx.x == 0) {
    if (gb != nullptr) gb[c] = cpu::convert<P>(static_cast<C>(sum_g));
    if (gw != nullptr) gw[c] = cpu::convert<P>(static_cast<C>(sum_gc * invstd));
  }
  if (gin == nullptr) return;
  const BatchNormInputGrad<C> f{mu, invstd, weight ? cpu::convert<C>(weight[c]) : C(1),
                                static_cast<C>(sum_g / double(m)),
                                static_cast<C>(sum_gc / double(m) * invstd * invstd)};
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const int64_t at = channel_at(d, c, j);
    gin[at] = cpu::convert<S>(f(cpu::convert<C>(g[at]), cpu::convert<C>(in[at])));
  }
}

// fn(S{}, P{}): the data's storage type and the statistics' (the same, or float32 beside
// 16-bit data; the front door admits nothing else).
template <typename Fn>
void dispatch_norm(DType dt, DType param_dt, Fn&& fn) {
  dispatch_computed(dt, [&](auto s) {
    using S = decltype(s);
    if (param_dt == dt) {
      fn(s, S{});
    } else if constexpr (!std::is_same<typename ComputeIn<S>::type, S>::value) {
      fn(s, float{});
    } else {
      unexpected_dtype("batch_norm's statistics", param_dt);
    }
  });
}

}  // namespace

void im2col(const Stream& stream, DType dt, const ImageShape& s, const Window2d& w, void* cols,
            const void* img) {
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    const int64_t n = s.batch * s.channels * w.kernel[0] * w.kernel[1] * s.oh * s.ow;
    launch_kernel("im2col on cuda", SG_KERNEL(im2col_kernel<T>), blocks_for(n), kThreads,
                  raw_cuda_stream(stream), s, w, static_cast<T*>(cols), static_cast<const T*>(img));
  });
}

void col2im(const Stream& stream, DType dt, const ImageShape& s, const Window2d& w, void* img,
            const void* cols) {
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    const int64_t n = s.batch * s.channels * s.height * s.width;
    launch_kernel("col2im on cuda", SG_KERNEL(col2im_kernel<T>), blocks_for(n), kThreads,
                  raw_cuda_stream(stream), s, w, static_cast<T*>(img), static_cast<const T*>(cols));
  });
}

void max_pool2d(const Stream& stream, DType dt, const ImageShape& s, const Window2d& w,
                void* values, int64_t* indices, const void* img) {
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    launch_kernel("max_pool2d on cuda", SG_KERNEL(max_pool_kernel<T>),
                  blocks_for(s.channels * s.oh * s.ow), kThreads, raw_cuda_stream(stream), s, w,
                  static_cast<T*>(values), indices, static_cast<const T*>(img));
  });
}

void max_pool2d_backward(const Stream& stream, DType dt, const ImageShape& s, const Window2d& w,
                         void* grad_in, const void* grad_out, const int64_t* indices) {
  const cudaStream_t cs = raw_cuda_stream(stream);
  // Indices outside their plane are refused before anything is written (as on cpu).
  const int64_t outputs = s.channels * s.oh * s.ow, area = s.height * s.width;
  const int64_t flat[1] = {outputs}, unit[1] = {1};
  int64_t position = 0, value = 0;
  SG_CHECK(!first_bad_index(stream, "max_pool2d_backward", cpu::make_layout<1>(flat, {unit}),
                            indices, area, &position, &value),
           ValueError, "max_pool2d_backward: index ", value, " (element ", position,
           " of indices) is outside its plane of ", area,
           " positions; were the indices modified after the forward?");
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    launch_kernel("max_pool2d_backward on cuda", SG_KERNEL(max_pool_backward_kernel<T>),
                  blocks_for(s.channels * s.height * s.width), kThreads, cs, s, w,
                  static_cast<T*>(grad_in), static_cast<const T*>(grad_out), indices);
  });
}

void batch_norm_forward(const Stream& stream, DType dt, DType param_dt, const NcsShape& d,
                        double eps, void* out, void* mean, void* var, const void* in,
                        const void* weight, const void* bias, const RunningUpdate& running) {
  if (d.c == 0) return;
  dispatch_norm(dt, param_dt, [&](auto s, auto p) {
    using S = decltype(s);
    using P = decltype(p);
    launch_kernel("batch_norm on cuda", SG_KERNEL(batch_norm_kernel<S, P>),
                  static_cast<unsigned>(d.c), kThreads, raw_cuda_stream(stream), d, eps,
                  static_cast<S*>(out), static_cast<P*>(mean), static_cast<P*>(var),
                  static_cast<const S*>(in), static_cast<const P*>(weight),
                  static_cast<const P*>(bias), running);
  });
}

void batch_norm_backward(const Stream& stream, DType dt, DType param_dt, const NcsShape& d,
                         double eps, void* grad_in, void* grad_weight, void* grad_bias,
                         const void* grad_out, const void* in, const void* mean, const void* var,
                         const void* weight) {
  if (d.c == 0) return;
  dispatch_norm(dt, param_dt, [&](auto s, auto p) {
    using S = decltype(s);
    using P = decltype(p);
    launch_kernel("batch_norm_backward on cuda", SG_KERNEL(batch_norm_backward_kernel<S, P>),
                  static_cast<unsigned>(d.c), kThreads, raw_cuda_stream(stream), d, eps,
                  static_cast<S*>(grad_in), static_cast<P*>(grad_weight),
                  static_cast<P*>(grad_bias), static_cast<const S*>(grad_out),
                  static_cast<const S*>(in), static_cast<const P*>(mean),
                  static_cast<const P*>(var), static_cast<const P*>(weight));
  });
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

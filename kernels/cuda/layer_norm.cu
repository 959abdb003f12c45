// Layer and RMS normalisation on cuda streams (declared in kernels/cuda/cuda_kernels.h),
// one kernel pair for both as on the host (NormRows::rms): the math of
// kernels/functors/norm_ops.h, row sums in the accumulator type (double for float32)
// through a fixed block tree, so every launch gives the same bits, within rounding of the
// cpu's 16 lanes.
//
// The parameter gradients are one thread per column adding the rows in order: no atomics,
// deterministic, and coalesced (neighbouring threads read neighbouring columns).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/functors/norm_ops.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/kernel_launch.h"
#include "runtime/cudaemu/kernel_spellings.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

// Blocks for m rows, one each; rows past the grid's cap go round again.
unsigned row_blocks(int64_t m) { return static_cast<unsigned>(m < kMaxBlocks ? m : kMaxBlocks); }

// Statistics and output of each row of in [m, n].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    layer_norm_kernel(NormRows d, double eps, T* out, T* mean, T* rstd, const T* in,
                      const T* weight, const T* bias) {
  using A = typename Acc<T>::type;
  SG_SHARED_ARRAY(A, part, kThreads);
  for (int64_t row = blockIdx.x; row < d.m; row += gridDim.x) {
    const T* x = in + row * d.n;
    T mu = T(0);
    if (!d.rms) {
      A sum = 0;
      for (int64_t j = threadIdx.x; j < d.n; j += kThreads) sum += A(x[j]);
      mu = static_cast<T>(double(block_sum(sum, part)) / double(d.n));
    }
    A sq = 0;
    for (int64_t j = threadIdx.x; j < d.n; j += kThreads) {
      const A c = A(x[j] - mu);
      sq += c * c;
    }
    const T r = static_cast<T>(layer_norm_rstd(double(block_sum(sq, part)) / double(d.n), eps));
    if (threadIdx.x == 0) {
      if (mean != nullptr) mean[row] = mu;
      rstd[row] = r;
    }
    const LayerNormApply<T> f{mu, r};
    for (int64_t j = threadIdx.x; j < d.n; j += kThreads) {
      T y = f(x[j]);
      if (weight != nullptr) y = y * weight[j];
      if (bias != nullptr) y = y + bias[j];
      out[row * d.n + j] = y;
    }
  }
}

// grad_in of each row.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    layer_norm_input_grad_kernel(NormRows d, T* gin, const T* g, const T* in, const T* mean,
                                 const T* rstd, const T* weight) {
  using A = typename Acc<T>::type;
  SG_SHARED_ARRAY(A, part, kThreads);
  for (int64_t row = blockIdx.x; row < d.m; row += gridDim.x) {
    const int64_t at = row * d.n;
    const T mu = mean != nullptr ? mean[row] : T(0);
    const T r = rstd[row];
    A sg = 0, sgc = 0;
    for (int64_t j = threadIdx.x; j < d.n; j += kThreads) {
      const T gw = weight != nullptr ? g[at + j] * weight[j] : g[at + j];
      sg += A(gw);
      sgc += A(gw) * A(in[at + j] - mu);
    }
    const double sum_gw = double(block_sum(sg, part));
    const double sum_gwc = double(block_sum(sgc, part));
    const LayerNormInputGrad<T> f{mu, r, d.rms ? T(0) : static_cast<T>(sum_gw / double(d.n)),
                                  static_cast<T>(sum_gwc / double(d.n) * r * r)};
    for (int64_t j = threadIdx.x; j < d.n; j += kThreads) {
      const T gw = weight != nullptr ? g[at + j] * weight[j] : g[at + j];
      gin[at + j] = f(gw, in[at + j]);
    }
  }
}

// grad_weight and grad_bias: column j sums its m rows in order (zeros when m is 0).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    layer_norm_param_grad_kernel(NormRows d, T* gw, T* gb, const T* g, const T* in,
                                 const T* mean, const T* rstd) {
  SG_GRID_LOOP(j, d.n) {
    double sw = 0, sb = 0;
    for (int64_t i = 0; i < d.m; ++i) {
      const LayerNormApply<T> f{mean != nullptr ? mean[i] : T(0), rstd[i]};
      const T gi = g[i * d.n + j];
      sw += double(gi) * double(f(in[i * d.n + j]));
      sb += double(gi);
    }
    if (gw != nullptr) gw[j] = static_cast<T>(sw);
    if (gb != nullptr) gb[j] = static_cast<T>(sb);
  }
}

}  // namespace

void layer_norm_forward(const Stream& stream, DType dt, const NormRows& d, double eps,
                        void* out, void* mean, void* rstd, const void* in, const void* weight,
                        const void* bias) {
  if (d.m == 0) return;
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    launch_kernel(d.rms ? "rms_norm on cuda" : "layer_norm on cuda",
                  SG_KERNEL(layer_norm_kernel<T>), row_blocks(d.m), kThreads,
                  raw_cuda_stream(stream), d, eps, static_cast<T*>(out), static_cast<T*>(mean),
                  static_cast<T*>(rstd), static_cast<const T*>(in), static_cast<const T*>(weight),
                  static_cast<const T*>(bias));
  });
}

void layer_norm_backward(const Stream& stream, DType dt, const NormRows& d, void* grad_in,
                         void* grad_weight, void* grad_bias, const void* grad_out,
                         const void* in, const void* mean, const void* rstd,
                         const void* weight) {
  const cudaStream_t cs = raw_cuda_stream(stream);
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    if (grad_in != nullptr && d.m > 0) {
      launch_kernel(d.rms ? "rms_norm_backward on cuda" : "layer_norm_backward on cuda",
                    SG_KERNEL(layer_norm_input_grad_kernel<T>), row_blocks(d.m), kThreads, cs, d,
                    static_cast<T*>(grad_in), static_cast<const T*>(grad_out),
                    static_cast<const T*>(in), static_cast<const T*>(mean),
                    static_cast<const T*>(rstd), static_cast<const T*>(weight));
    }
    if ((grad_weight != nullptr || grad_bias != nullptr) && d.n > 0) {
      launch_kernel(d.rms ? "rms_norm_backward on cuda" : "layer_norm_backward on cuda",
                    SG_KERNEL(layer_norm_param_grad_kernel<T>), blocks_for(d.n), kThreads, cs, d,
                    static_cast<T*>(grad_weight), static_cast<T*>(grad_bias),
                    static_cast<const T*>(grad_out), static_cast<const T*>(in),
                    static_cast<const T*>(mean), static_cast<const T*>(rstd));
    }
  });
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

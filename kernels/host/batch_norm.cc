// batch_norm_forward and batch_norm_backward on the host (kernels/nn_kernels.h).
//
// One channel at a time: its N rows of S contiguous values are read twice for the
// statistics (mean, then the centred sum of squares, as the composite op computed them)
// and once more to write, each pass a loop of the level in use (loops_nn.cc). Sums
// accumulate in double, in fixed lanes, so every level gives the same bits. Channels are
// independent, so they are shared out over the kernels' threads (parallel.h) in runs of
// at least kNormGrain values, and every thread count gives the same bits too.
#include <algorithm>
#include <cstdint>

#include "kernels/functors/norm_ops.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/loops.h"
#include "kernels/host/parallel.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// The level's loops, captured at launch: a sim stream runs the level it was launched with.
struct Levels {
  const Loops* loops;
  const NnLoops* nn;
};

Levels levels_now() { return {&loops(), &nn_loops()}; }

// fn(c) for every channel, in runs of channels holding at least kNormGrain values.
template <typename Fn>
void for_each_channel(const NcsShape& d, Fn&& fn) {
  const int64_t per_channel = std::max<int64_t>(1, d.n * d.s);
  const int64_t grain = std::max<int64_t>(1, kNormGrain / per_channel);
  parallel_for(0, d.c, grain, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) fn(c);
  });
}

// Rows are prefetched (prefetch_row, loops.h): a channel's rows lie C x S values apart,
// too far for the hardware's prefetchers to follow from one row to the next. That holds
// for the rows written too: each pass that writes brings the next row of its output into
// the cache before it writes the current one (batch norm [64, 16, 28, 28] on one thread,
// forward 1.55-1.93 -> 0.90-1.11 ms, forward and backward 3.57-4.44 -> 2.24-2.78 over six
// alternating pairs of processes; bench/RESULTS.md, 2026-12-03).

template <typename T>
void forward_channel(const Levels& lv, DType dt, const NcsShape& d, int64_t c, T* out, T* mean,
                     T* var, const T* in, const T* weight, const T* bias, double eps) {
  const double m = static_cast<double>(d.n * d.s);
  const int64_t row_step = d.c * d.s;
  const T* first = in + c * d.s;
  double sum = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    if (i + 1 < d.n) prefetch_row(first + (i + 1) * row_step, d.s);
    sum += row_sum(*lv.loops, dt, first + i * row_step, d.s);
  }
  const T mu = static_cast<T>(sum / m);
  double sq = 0;
  for (int64_t i = 0; i < d.n; ++i) sq += lv.nn->centred_squares(dt, first + i * row_step, d.s, mu);
  const T v = static_cast<T>(sq / m);
  mean[c] = mu;
  var[c] = v;
  const double coeffs[4] = {mu, batch_norm_invstd(v, eps), weight ? weight[c] : T(1),
                            bias ? bias[c] : T(0)};
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t at = c * d.s + i * row_step;
    if (i + 1 < d.n) prefetch_row(out + at + row_step, d.s);
    lv.nn->batch_norm_apply(dt, out + at, in + at, d.s, coeffs);
  }
}

template <typename T>
void backward_channel(const Levels& lv, DType dt, const NcsShape& d, int64_t c, T* gin, T* gw,
                      T* gb, const T* g, const T* in, const T* mean, const T* var,
                      const T* weight, double eps) {
  const double m = static_cast<double>(d.n * d.s);
  const int64_t row_step = d.c * d.s;
  const T mu = mean[c];
  const T invstd = batch_norm_invstd(var[c], eps);
  double sum_g = 0, sum_gc = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t at = c * d.s + i * row_step;
    if (i + 1 < d.n) {
      prefetch_row(g + at + row_step, d.s);
      prefetch_row(in + at + row_step, d.s);
    }
    lv.nn->grad_sums(dt, g + at, in + at, d.s, mu, &sum_g, &sum_gc);
  }
  if (gb != nullptr) gb[c] = static_cast<T>(sum_g);
  if (gw != nullptr) gw[c] = static_cast<T>(sum_gc * invstd);
  if (gin == nullptr) return;
  const double coeffs[5] = {mu, invstd, weight ? weight[c] : T(1), static_cast<T>(sum_g / m),
                            static_cast<T>(sum_gc / m * invstd * invstd)};
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t at = c * d.s + i * row_step;
    if (i + 1 < d.n) prefetch_row(gin + at + row_step, d.s);
    lv.nn->batch_norm_input_grad(dt, gin + at, g + at, in + at, d.s, coeffs);
  }
}

}  // namespace

void batch_norm_forward(const Stream& stream, const LaunchSpec& spec, DType dt,
                        const NcsShape& d, double eps, void* o, void* mn, void* vr,
                        const void* x, const void* w, const void* b) {
  dispatch::enqueue(stream, spec, [d, o, mn, vr, x, w, b, eps, dt, lv = levels_now()] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      for_each_channel(d, [&](int64_t c) {
        forward_channel<T>(lv, dt, d, c, static_cast<T*>(o), static_cast<T*>(mn),
                           static_cast<T*>(vr), static_cast<const T*>(x),
                           static_cast<const T*>(w), static_cast<const T*>(b), eps);
      });
    });
  });
}

void batch_norm_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                         const NcsShape& d, double eps, void* gi, void* gw, void* gb,
                         const void* g, const void* x, const void* mn, const void* vr,
                         const void* w) {
  dispatch::enqueue(stream, spec, [d, gi, gw, gb, g, x, mn, vr, w, eps, dt, lv = levels_now()] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      for_each_channel(d, [&](int64_t c) {
        backward_channel<T>(lv, dt, d, c, static_cast<T*>(gi), static_cast<T*>(gw),
                            static_cast<T*>(gb), static_cast<const T*>(g),
                            static_cast<const T*>(x), static_cast<const T*>(mn),
                            static_cast<const T*>(vr), static_cast<const T*>(w), eps);
      });
    });
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

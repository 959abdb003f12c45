// batch_norm_forward and batch_norm_backward on the host (kernels/nn_kernels.h).
//
// A group of channels at a time: each channel's N rows of S contiguous values are read
// twice for the statistics (mean, then the centred sum of squares, as the composite op
// computed them) and once more to write, each pass a loop of the level in use
// (loops_nn.cc) over the group's rows. Sums accumulate in double, in fixed lanes and in
// image order, so every level gives the same bits. The running statistics, where given,
// move once a channel's mean and variance are known. Channels are independent, so they are
// shared out over the kernels' threads (parallel.h) in runs of at least kNormGrain values,
// and every thread count and grouping gives the same bits too.
#include <algorithm>
#include <cstdint>

#include "kernels/functors/norm_ops.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/loops.h"
#include "kernels/host/parallel.h"
#include "runtime/base/error.h"

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

// Channels walked together: their sums live on the stack.
constexpr int64_t kGroupChannels = 64;

// fn(first, last) for groups of channels that together cover [0, C): shared out over the
// kernels' threads in runs holding at least kNormGrain values, each run cut into groups of
// at most kNormGrain values (and kGroupChannels channels), which each pass walks image by
// image (walk_rows) while they stay in the core's cache from one pass to the next.
template <typename Fn>
void for_each_group(const NcsShape& d, Fn&& fn) {
  const int64_t per_channel = std::max<int64_t>(1, d.n * d.s);
  const int64_t grain = std::max<int64_t>(1, kNormGrain / per_channel);
  const int64_t group = std::min(grain, kGroupChannels);
  parallel_for(0, d.c, grain, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; c += group) fn(c, std::min(end, c + group));
  });
}

// fn(k, at, next) for every row of channels [first, last): image by image, and in each
// image channel by channel, so that a group's rows, which lie back to back in an image,
// are read in the order they lie in memory. Channel by channel instead, a 7 x 7 plane's
// rows of 196 bytes each lay C x S values apart, and each pass fetched every cache line
// they share with the next channel's rows twice: a ResNet's [64, 64, 7, 7] batch norm
// backward took three times as long per value as its [64, 16, 28, 28] one
// (bench/RESULTS.md).
// k is the channel's place in the group, at the row's offset and next the offset of the
// row after it, or -1 after the last. Each channel's rows come in image order, so its
// sums add in the same order as one channel at a time would: the bits do not change.
template <typename Fn>
void walk_rows(const NcsShape& d, int64_t first, int64_t last, Fn&& fn) {
  for (int64_t i = 0; i < d.n; ++i) {
    for (int64_t c = first; c < last; ++c) {
      const int64_t at = (i * d.c + c) * d.s;
      const int64_t next = c + 1 < last ? at + d.s
                           : i + 1 < d.n ? ((i + 1) * d.c + first) * d.s
                                         : -1;
      fn(c - first, at, next);
    }
  }
}

// Rows are prefetched (prefetch_row, loops.h): the next row of a walk may lie C x S
// values further on, too far for the hardware's prefetchers to follow. That holds for the
// rows written too: each pass that writes brings the next row of its output into the
// cache before it writes the current one (batch norm [64, 16, 28, 28] on one thread,
// forward 1.55-1.93 -> 0.90-1.11 ms, forward and backward 3.57-4.44 -> 2.24-2.78 over six
// alternating pairs of processes; bench/RESULTS.md, 2026-12-03).

template <typename T>
void forward_group(const Levels& lv, DType dt, const NcsShape& d, int64_t first, int64_t last,
                   T* out, T* mean, T* var, const T* in, const T* weight, const T* bias,
                   double eps, const RunningUpdate& running) {
  const double m = static_cast<double>(d.n * d.s);
  double sum[kGroupChannels] = {}, sq[kGroupChannels] = {};
  T mu[kGroupChannels];
  double coeffs[kGroupChannels][4];
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t next) {
    if (next >= 0) prefetch_row(in + next, d.s);
    sum[k] += row_sum(*lv.loops, dt, in + at, d.s);
  });
  for (int64_t k = 0; k < last - first; ++k) mu[k] = static_cast<T>(sum[k] / m);
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t) {
    sq[k] += lv.nn->centred_squares(dt, in + at, d.s, mu[k]);
  });
  for (int64_t k = 0; k < last - first; ++k) {
    const int64_t c = first + k;
    const T v = static_cast<T>(sq[k] / m);
    mean[c] = mu[k];
    var[c] = v;
    if (running.mean != nullptr) {
      T* rm = static_cast<T*>(running.mean) + c;
      T* rv = static_cast<T*>(running.var) + c;
      *rm = static_cast<T>(running_moved(static_cast<double>(*rm), static_cast<double>(mu[k]),
                                         running.momentum, 1));
      *rv = static_cast<T>(running_moved(static_cast<double>(*rv), static_cast<double>(v),
                                         running.momentum, m / (m - 1)));
    }
    coeffs[k][0] = mu[k];
    coeffs[k][1] = batch_norm_invstd(v, eps);
    coeffs[k][2] = weight ? weight[c] : T(1);
    coeffs[k][3] = bias ? bias[c] : T(0);
  }
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t next) {
    if (next >= 0) prefetch_row(out + next, d.s);
    lv.nn->batch_norm_apply(dt, out + at, in + at, d.s, coeffs[k]);
  });
}

template <typename T>
void backward_group(const Levels& lv, DType dt, const NcsShape& d, int64_t first, int64_t last,
                    T* gin, T* gw, T* gb, const T* g, const T* in, const T* mean, const T* var,
                    const T* weight, double eps) {
  const double m = static_cast<double>(d.n * d.s);
  double sum_g[kGroupChannels] = {}, sum_gc[kGroupChannels] = {};
  T mu[kGroupChannels], invstd[kGroupChannels];
  for (int64_t k = 0; k < last - first; ++k) {
    mu[k] = mean[first + k];
    invstd[k] = batch_norm_invstd(var[first + k], eps);
  }
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t next) {
    if (next >= 0) {
      prefetch_row(g + next, d.s);
      prefetch_row(in + next, d.s);
    }
    lv.nn->grad_sums(dt, g + at, in + at, d.s, mu[k], &sum_g[k], &sum_gc[k]);
  });
  for (int64_t k = 0; k < last - first; ++k) {
    if (gb != nullptr) gb[first + k] = static_cast<T>(sum_g[k]);
    if (gw != nullptr) gw[first + k] = static_cast<T>(sum_gc[k] * invstd[k]);
  }
  if (gin == nullptr) return;
  double coeffs[kGroupChannels][5];
  for (int64_t k = 0; k < last - first; ++k) {
    const int64_t c = first + k;
    coeffs[k][0] = mu[k];
    coeffs[k][1] = invstd[k];
    coeffs[k][2] = weight ? weight[c] : T(1);
    coeffs[k][3] = static_cast<T>(sum_g[k] / m);
    coeffs[k][4] = static_cast<T>(sum_gc[k] / m * invstd[k] * invstd[k]);
  }
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t next) {
    if (next >= 0) prefetch_row(gin + next, d.s);
    lv.nn->batch_norm_input_grad(dt, gin + at, g + at, in + at, d.s, coeffs[k]);
  });
}

}  // namespace

void batch_norm_forward(const Stream& stream, const LaunchSpec& spec, DType dt, DType param_dt,
                        const NcsShape& d, double eps, void* o, void* mn, void* vr,
                        const void* x, const void* w, const void* b,
                        const RunningUpdate& running) {
  SG_INTERNAL_CHECK(param_dt == dt, spec.name, ": the host takes ", dtype_name(param_dt),
                    " statistics beside ", dtype_name(dt), " data only through widening");
  dispatch::enqueue(stream, spec, [d, o, mn, vr, x, w, b, eps, dt, running,
                                   lv = levels_now()] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      for_each_group(d, [&](int64_t first, int64_t last) {
        forward_group<T>(lv, dt, d, first, last, static_cast<T*>(o), static_cast<T*>(mn),
                         static_cast<T*>(vr), static_cast<const T*>(x),
                         static_cast<const T*>(w), static_cast<const T*>(b), eps, running);
      });
    });
  });
}

void batch_norm_backward(const Stream& stream, const LaunchSpec& spec, DType dt, DType param_dt,
                         const NcsShape& d, double eps, void* gi, void* gw, void* gb,
                         const void* g, const void* x, const void* mn, const void* vr,
                         const void* w) {
  SG_INTERNAL_CHECK(param_dt == dt, spec.name, ": the host takes ", dtype_name(param_dt),
                    " statistics beside ", dtype_name(dt), " data only through widening");
  dispatch::enqueue(stream, spec, [d, gi, gw, gb, g, x, mn, vr, w, eps, dt, lv = levels_now()] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      for_each_group(d, [&](int64_t first, int64_t last) {
        backward_group<T>(lv, dt, d, first, last, static_cast<T*>(gi), static_cast<T*>(gw),
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

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
#include <type_traits>
#include <vector>

#include "kernels/functors/convert.h"
#include "kernels/functors/norm_ops.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/loops.h"
#include "kernels/host/parallel.h"
#include "runtime/base/error.h"
#include "runtime/base/half.h"

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

// 16-bit data S (float16, bfloat16) is normalised in float, as the widening rule says,
// beside statistics and parameters P of float32 or S: each row is widened into a float
// buffer right before a pass reads it and a written row rounded from one, by the level's
// copy loop (vector code; copy's rounding is the rule's), and each statistic rounded to P
// once. Those are the bits of the widened call without its copies: widened, a bfloat16
// ResNet's batch norms ran as 250 launches a step and their copies (bench/RESULTS.md).
// Other dtypes: S, P and the compute type (ComputeIn, convert.h) are one.

// Rows of n values as the loops take them, of the compute type T: the row itself, or its
// values widened into one of two buffers (a pass reads at most two rows at once).
template <typename S, typename T>
class Rows {
 public:
  Rows(const Levels& lv, int64_t n)
      : lv_(lv), n_(n), layout_(make_layout<2>({n}, {&kOne, &kOne})) {
    if (!kSame) {
      buffer_[0].resize(static_cast<size_t>(n));
      buffer_[1].resize(static_cast<size_t>(n));
    }
  }
  const T* read(const S* row, int which = 0) {
    if constexpr (kSame) {
      (void)which;
      return row;
    } else {
      T* b = buffer_[which].data();
      lv_.loops->copy(DTypeOf<T>::value, DTypeOf<S>::value, layout_, b, row, 0, n_);
      return b;
    }
  }
  // Where a pass writes a row of out, then store() puts it into out.
  T* out(S* row) {
    if constexpr (kSame) {
      return row;
    } else {
      (void)row;
      return out_.data();
    }
  }
  void store(S* row) {
    if constexpr (!kSame) {
      lv_.loops->copy(DTypeOf<S>::value, DTypeOf<T>::value, layout_, row, out_.data(), 0, n_);
    } else {
      (void)row;
    }
  }
  void make_out() {
    if (!kSame) out_.resize(static_cast<size_t>(n_));
  }

 private:
  static constexpr bool kSame = std::is_same<S, T>::value;
  static constexpr int64_t kOne = 1;
  const Levels& lv_;
  int64_t n_;
  Layout<2> layout_;
  std::vector<T> buffer_[2], out_;
};

// A parameter of type P as a compute value (exact: P is T or narrower), or `otherwise`
// where there is none.
template <typename T, typename P>
T param(const P* p, int64_t c, T otherwise) {
  return p != nullptr ? convert<T>(p[c]) : otherwise;
}

template <typename S, typename P>
void forward_group(const Levels& lv, const NcsShape& d, int64_t first, int64_t last, S* out,
                   P* mean, P* var, const S* in, const P* weight, const P* bias, double eps,
                   const RunningUpdate& running) {
  using T = typename ComputeIn<S>::type;
  const DType dt = DTypeOf<T>::value;
  Rows<S, T> rows(lv, d.s);
  const double m = static_cast<double>(d.n * d.s);
  double sum[kGroupChannels] = {}, sq[kGroupChannels] = {};
  T mu[kGroupChannels];
  double coeffs[kGroupChannels][4];
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t next) {
    if (next >= 0) prefetch_row(in + next, d.s);
    sum[k] += row_sum(*lv.loops, dt, rows.read(in + at), d.s);
  });
  for (int64_t k = 0; k < last - first; ++k) mu[k] = static_cast<T>(sum[k] / m);
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t) {
    sq[k] += lv.nn->centred_squares(dt, rows.read(in + at), d.s, mu[k]);
  });
  for (int64_t k = 0; k < last - first; ++k) {
    const int64_t c = first + k;
    const T v = static_cast<T>(sq[k] / m);
    mean[c] = convert<P>(mu[k]);
    var[c] = convert<P>(v);
    if (running.mean != nullptr) {
      P* rm = static_cast<P*>(running.mean) + c;
      P* rv = static_cast<P*>(running.var) + c;
      *rm = convert<P>(static_cast<T>(running_moved(static_cast<double>(convert<T>(*rm)),
                                                    static_cast<double>(mu[k]),
                                                    running.momentum, 1)));
      *rv = convert<P>(static_cast<T>(running_moved(static_cast<double>(convert<T>(*rv)),
                                                    static_cast<double>(v), running.momentum,
                                                    m / (m - 1))));
    }
    coeffs[k][0] = mu[k];
    coeffs[k][1] = batch_norm_invstd(v, eps);
    coeffs[k][2] = param(weight, c, T(1));
    coeffs[k][3] = param(bias, c, T(0));
  }
  rows.make_out();
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t next) {
    if (next >= 0) prefetch_row(out + next, d.s);
    lv.nn->batch_norm_apply(dt, rows.out(out + at), rows.read(in + at), d.s, coeffs[k]);
    rows.store(out + at);
  });
}

template <typename S, typename P>
void backward_group(const Levels& lv, const NcsShape& d, int64_t first, int64_t last, S* gin,
                    P* gw, P* gb, const S* g, const S* in, const P* mean, const P* var,
                    const P* weight, double eps) {
  using T = typename ComputeIn<S>::type;
  const DType dt = DTypeOf<T>::value;
  Rows<S, T> rows(lv, d.s);
  const double m = static_cast<double>(d.n * d.s);
  double sum_g[kGroupChannels] = {}, sum_gc[kGroupChannels] = {};
  T mu[kGroupChannels], invstd[kGroupChannels];
  for (int64_t k = 0; k < last - first; ++k) {
    mu[k] = convert<T>(mean[first + k]);
    invstd[k] = batch_norm_invstd(convert<T>(var[first + k]), eps);
  }
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t next) {
    if (next >= 0) {
      prefetch_row(g + next, d.s);
      prefetch_row(in + next, d.s);
    }
    lv.nn->grad_sums(dt, rows.read(g + at, 0), rows.read(in + at, 1), d.s, mu[k], &sum_g[k],
                     &sum_gc[k]);
  });
  for (int64_t k = 0; k < last - first; ++k) {
    if (gb != nullptr) gb[first + k] = convert<P>(static_cast<T>(sum_g[k]));
    if (gw != nullptr) gw[first + k] = convert<P>(static_cast<T>(sum_gc[k] * invstd[k]));
  }
  if (gin == nullptr) return;
  double coeffs[kGroupChannels][5];
  for (int64_t k = 0; k < last - first; ++k) {
    const int64_t c = first + k;
    coeffs[k][0] = mu[k];
    coeffs[k][1] = invstd[k];
    coeffs[k][2] = param(weight, c, T(1));
    coeffs[k][3] = static_cast<T>(sum_g[k] / m);
    coeffs[k][4] = static_cast<T>(sum_gc[k] / m * invstd[k] * invstd[k]);
  }
  rows.make_out();
  walk_rows(d, first, last, [&](int64_t k, int64_t at, int64_t next) {
    if (next >= 0) prefetch_row(gin + next, d.s);
    lv.nn->batch_norm_input_grad(dt, rows.out(gin + at), rows.read(g + at, 0),
                                 rows.read(in + at, 1), d.s, coeffs[k]);
    rows.store(gin + at);
  });
}

// fn(S{}, P{}) with the data's and the statistics' storage types: one floating dtype, or
// 16-bit data beside float32 statistics (the front door admits nothing else).
template <typename Fn>
void dispatch_storage(const char* name, DType dt, DType param_dt, Fn&& fn) {
  const bool mixed = param_dt == DType::kFloat32 && is_reduced_floating(dt);
  SG_INTERNAL_CHECK(param_dt == dt || mixed, name, ": ", dtype_name(param_dt),
                    " statistics beside ", dtype_name(dt), " data");
  auto beside = [&](auto s) {
    if (mixed) return fn(s, float{});
    fn(s, s);
  };
  if (dt == DType::kFloat16) return beside(Half{});
  if (dt == DType::kBFloat16) return beside(BFloat16{});
  dispatch_floating(dt, [&](auto t) { fn(t, t); });
}

}  // namespace

void batch_norm_forward(const Stream& stream, const LaunchSpec& spec, DType dt, DType param_dt,
                        const NcsShape& d, double eps, void* o, void* mn, void* vr,
                        const void* x, const void* w, const void* b,
                        const RunningUpdate& running) {
  dispatch::enqueue(stream, spec, [d, o, mn, vr, x, w, b, eps, dt, param_dt, running,
                                   name = spec.name, lv = levels_now()] {
    dispatch_storage(name, dt, param_dt, [&](auto s, auto p) {
      using S = decltype(s);
      using P = decltype(p);
      for_each_group(d, [&](int64_t first, int64_t last) {
        forward_group<S, P>(lv, d, first, last, static_cast<S*>(o), static_cast<P*>(mn),
                            static_cast<P*>(vr), static_cast<const S*>(x),
                            static_cast<const P*>(w), static_cast<const P*>(b), eps, running);
      });
    });
  });
}

void batch_norm_backward(const Stream& stream, const LaunchSpec& spec, DType dt, DType param_dt,
                         const NcsShape& d, double eps, void* gi, void* gw, void* gb,
                         const void* g, const void* x, const void* mn, const void* vr,
                         const void* w) {
  dispatch::enqueue(stream, spec, [d, gi, gw, gb, g, x, mn, vr, w, eps, dt, param_dt,
                                   name = spec.name, lv = levels_now()] {
    dispatch_storage(name, dt, param_dt, [&](auto s, auto p) {
      using S = decltype(s);
      using P = decltype(p);
      for_each_group(d, [&](int64_t first, int64_t last) {
        backward_group<S, P>(lv, d, first, last, static_cast<S*>(gi), static_cast<P*>(gw),
                             static_cast<P*>(gb), static_cast<const S*>(g),
                             static_cast<const S*>(x), static_cast<const P*>(mn),
                             static_cast<const P*>(vr), static_cast<const P*>(w), eps);
      });
    });
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

// layer_norm_forward / rms_norm_forward and their backwards on the host
// (kernels/nn_kernels.h), as one kernel pair with NormRows::rms choosing the variant: RMS
// normalisation is layer normalisation with the mean fixed at 0 and the gradient not
// centred, so both share the loops below (loops_nn.cc) and every rule about threads.
//
// Every row is computed whole by one thread: its sums (in double, in the 16 fixed lanes
// of loops.h) never depend on the split. Forward splits the rows over threads as they
// come. Backward's parameter gradients sum over rows: the rows are cut into blocks whose
// size depends on m alone (block_rows), each block's rows add into that block's partial
// sums in row order, and the partials are added in block order once every block is done.
// Threads only choose which blocks they take, so every thread count gives the same bits.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/functors/norm_ops.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/loops.h"
#include "kernels/host/parallel.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// Backward's blocks: at most kMaxBlocks (bounding the partial sums at kMaxBlocks rows of
// doubles per parameter gradient) and at least kMinBlockRows rows each (so that the
// partials never outgrow the input).
constexpr int64_t kMaxBlocks = 64;
constexpr int64_t kMinBlockRows = 16;

// Rows whose statistics are made before any of them is applied: see forward_rows.
constexpr int64_t kGroup = 4;

int64_t block_rows(int64_t m) {
  return std::max<int64_t>(kMinBlockRows, (m + kMaxBlocks - 1) / kMaxBlocks);
}

// The level's loops, captured at launch: a sim stream runs the level it was launched with.
struct Levels {
  const Loops* loops;
  const NnLoops* nn;
};

// Rows per parallel chunk so that a chunk covers about kNormGrain elements.
int64_t grain_rows(int64_t per_row) {
  return std::max<int64_t>(1, kNormGrain / std::max<int64_t>(1, per_row));
}

// Rows [first, last), each step for a group of rows before the next step: a row's
// statistics are a chain (sum, fold, mean, centred squares, fold, square root, division)
// that its apply loop waits on, and a row at a time left the core idle on that chain
// (a tenth of the forward's time at avx2). Grouped, the next row's loop runs while the
// last row's chain finishes. Each row's values are the same either way.
template <typename T>
void forward_rows(const Levels& lv, DType dt, const NormRows& d, double eps, int64_t first,
                  int64_t last, T* out, T* mean, T* rstd, const T* in, const T* weight,
                  const T* bias) {
  const double count = static_cast<double>(d.n);
  for (int64_t i0 = first; i0 < last; i0 += kGroup) {
    const int64_t k = std::min(kGroup, last - i0);
    const T* x = in + i0 * d.n;
    T mu[kGroup] = {};
    if (!d.rms) {
      double sums[kGroup];
      for (int64_t j = 0; j < k; ++j) sums[j] = row_sum(*lv.loops, dt, x + j * d.n, d.n);
      for (int64_t j = 0; j < k; ++j) mu[j] = static_cast<T>(sums[j] / count);
    }
    double var[kGroup];
    for (int64_t j = 0; j < k; ++j) {
      var[j] = lv.nn->centred_squares(dt, x + j * d.n, d.n, mu[j]) / count;
    }
    T r[kGroup];
    for (int64_t j = 0; j < k; ++j) r[j] = static_cast<T>(layer_norm_rstd(var[j], eps));
    for (int64_t j = 0; j < k; ++j) {
      if (mean != nullptr) mean[i0 + j] = mu[j];
      rstd[i0 + j] = r[j];
      lv.nn->layer_norm_apply(dt, out + (i0 + j) * d.n, x + j * d.n, weight, bias, d.n, mu[j],
                              r[j]);
    }
  }
}

// Pointers of one backward launch, typed.
template <typename T>
struct BackwardArgs {
  T *gin, *gw, *gb;
  const T *g, *x, *mean, *rstd, *weight;
};

// grad_in of rows [first, last); `scratch` holds n values. Each row's successor is
// prefetched: the first pass over a row waited on memory most of its time, the rows coming
// from beyond the L2 cache (a [1024, 256] float step's four tensors are 4 MiB). (The
// forward's first pass waits as long, but is bound by the bandwidth: the same prefetch
// there made it slower, measured in bench/RESULTS.md.)
template <typename T>
void input_grad_rows(const Levels& lv, DType dt, const NormRows& d, const BackwardArgs<T>& a,
                     int64_t first, int64_t last, T* scratch) {
  const double count = static_cast<double>(d.n);
  for (int64_t i = first; i < last; ++i) {
    const T* g = a.g + i * d.n;
    const T* x = a.x + i * d.n;
    if (i + 1 < last) {
      prefetch_row(g + d.n, d.n);
      prefetch_row(x + d.n, d.n);
    }
    const T mu = a.mean != nullptr ? a.mean[i] : T(0);
    const T r = a.rstd[i];
    double sum_gw = 0, sum_gwc = 0;
    const T* gw = g;
    if (a.weight != nullptr) {
      lv.nn->scaled_grad_sums(dt, scratch, g, a.weight, x, d.n, mu, &sum_gw, &sum_gwc);
      gw = scratch;
    } else {
      lv.nn->grad_sums(dt, g, x, d.n, mu, &sum_gw, &sum_gwc);
    }
    const double c[4] = {mu, r, d.rms ? T(0) : static_cast<T>(sum_gw / count),
                         static_cast<T>(sum_gwc / count * r * r)};
    lv.nn->layer_norm_input_grad(dt, a.gin + i * d.n, gw, x, d.n, c);
  }
}

// Rows [first, last): grad_in of each row, then their shares of the parameter gradients
// written into part_w / part_b (null when not wanted). `scratch` holds n values. Rows
// first: their passes read g and x in address order, which the prefetcher follows, and
// leave the block in L1 for the column sums, which read it a strip of columns at a time
// across the rows. (Grouping rows as forward_rows does gained nothing here: measured,
// bench/RESULTS.md.)
template <typename T>
void backward_rows(const Levels& lv, DType dt, const NormRows& d, const BackwardArgs<T>& a,
                   int64_t first, int64_t last, double* part_w, double* part_b, T* scratch) {
  if (a.gin != nullptr) input_grad_rows(lv, dt, d, a, first, last, scratch);
  if (part_w != nullptr || part_b != nullptr) {
    lv.nn->layer_norm_param_block(dt, part_w, part_b, a.g + first * d.n, a.x + first * d.n,
                                  a.mean != nullptr ? a.mean + first : nullptr,
                                  a.rstd + first, last - first, d.n);
  }
}

template <typename T>
void run_backward(const Levels& lv, DType dt, const NormRows& d, const BackwardArgs<T>& a) {
  const bool params = a.gw != nullptr || a.gb != nullptr;
  const int64_t rows = block_rows(d.m);
  const int64_t blocks = (d.m + rows - 1) / rows;
  const size_t n = static_cast<size_t>(d.n);
  // Partial sums of each block, [blocks, n] per wanted gradient, each written whole by
  // its block (so not zeroed first).
  const std::unique_ptr<double[]> part_w(a.gw != nullptr ? new double[blocks * n] : nullptr);
  const std::unique_ptr<double[]> part_b(a.gb != nullptr ? new double[blocks * n] : nullptr);
  parallel_for(0, blocks, grain_rows(rows * d.n), [&](int64_t b, int64_t e) {
    std::vector<T> scratch(a.gin != nullptr && a.weight != nullptr ? n : 0);
    for (int64_t k = b; k < e; ++k) {
      backward_rows(lv, dt, d, a, k * rows, std::min(d.m, (k + 1) * rows),
                    part_w ? part_w.get() + k * n : nullptr,
                    part_b ? part_b.get() + k * n : nullptr, scratch.data());
    }
  });
  if (!params) return;
  // Blocks in order; no rows (m == 0) leave zeros, the sum over nothing.
  auto fold = [&](const double* part, T* out) {
    if (out == nullptr) return;
    std::vector<double> acc(n, 0.0);
    for (int64_t k = 0; k < blocks; ++k) {
      const double* p = part + k * n;
      for (size_t j = 0; j < n; ++j) acc[j] += p[j];
    }
    for (size_t j = 0; j < n; ++j) out[j] = static_cast<T>(acc[j]);
  };
  fold(part_w.get(), a.gw);
  fold(part_b.get(), a.gb);
}

}  // namespace

void layer_norm_forward(const Stream& stream, const LaunchSpec& spec, DType dt,
                        const NormRows& d, double eps, void* o, void* mn, void* rs,
                        const void* x, const void* w, const void* b) {
  const Levels lv{&loops(), &nn_loops()};
  dispatch::enqueue(stream, spec, [d, o, mn, rs, x, w, b, eps, dt, lv] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      parallel_for(0, d.m, grain_rows(d.n), [&](int64_t first, int64_t last) {
        forward_rows<T>(lv, dt, d, eps, first, last, static_cast<T*>(o), static_cast<T*>(mn),
                        static_cast<T*>(rs), static_cast<const T*>(x),
                        static_cast<const T*>(w), static_cast<const T*>(b));
      });
    });
  });
}

void layer_norm_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                         const NormRows& d, void* gi, void* gw, void* gb, const void* g,
                         const void* x, const void* mn, const void* rs, const void* w) {
  const Levels lv{&loops(), &nn_loops()};
  dispatch::enqueue(stream, spec, [d, gi, gw, gb, g, x, mn, rs, w, dt, lv] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      const BackwardArgs<T> a{static_cast<T*>(gi),       static_cast<T*>(gw),
                              static_cast<T*>(gb),       static_cast<const T*>(g),
                              static_cast<const T*>(x),  static_cast<const T*>(mn),
                              static_cast<const T*>(rs), static_cast<const T*>(w)};
      run_backward(lv, dt, d, a);
    });
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

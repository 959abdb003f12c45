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

int64_t block_rows(int64_t m) {
  return std::max<int64_t>(kMinBlockRows, (m + kMaxBlocks - 1) / kMaxBlocks);
}

// The level's loops, captured at launch: a sim stream runs the level it was launched with.
struct Levels {
  const Loops* loops;
  const NnLoops* nn;
};

// Rows per parallel chunk so that a chunk covers about kParallelGrain elements.
int64_t grain_rows(int64_t per_row) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, per_row));
}

// The sum of n contiguous elements in kSumBlock blocks, added in order (as reduce() sums a
// row).
template <typename T>
double row_sum(const Loops& lp, DType dt, const T* p, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i += kSumBlock) {
    s += lp.sum_block(dt, p + i, n - i < kSumBlock ? n - i : kSumBlock);
  }
  return s;
}

template <typename T>
void forward_row(const Levels& lv, DType dt, const NormRows& d, double eps, int64_t i, T* out,
                 T* mean, T* rstd, const T* in, const T* weight, const T* bias) {
  const T* x = in + i * d.n;
  const double count = static_cast<double>(d.n);
  const T mu = d.rms ? T(0) : static_cast<T>(row_sum(*lv.loops, dt, x, d.n) / count);
  const double var = lv.nn->centred_squares(dt, x, d.n, mu) / count;
  const T r = static_cast<T>(layer_norm_rstd(var, eps));
  if (mean != nullptr) mean[i] = mu;
  rstd[i] = r;
  lv.nn->layer_norm_apply(dt, out + i * d.n, x, weight, bias, d.n, mu, r);
}

// Pointers of one backward launch, typed.
template <typename T>
struct BackwardArgs {
  T *gin, *gw, *gb;
  const T *g, *x, *mean, *rstd, *weight;
};

// Rows [first, last): grad_in of each row, and the rows' shares of the parameter
// gradients added into part_w / part_b (null when not wanted). `scratch` holds n values.
template <typename T>
void backward_rows(const Levels& lv, DType dt, const NormRows& d, const BackwardArgs<T>& a,
                   int64_t first, int64_t last, double* part_w, double* part_b, T* scratch) {
  const double count = static_cast<double>(d.n);
  for (int64_t i = first; i < last; ++i) {
    const T* g = a.g + i * d.n;
    const T* x = a.x + i * d.n;
    const T mu = a.mean != nullptr ? a.mean[i] : T(0);
    const T r = a.rstd[i];
    double sum_gw = 0, sum_gwc = 0;
    const T* gw = g;
    if (a.gin != nullptr && a.weight != nullptr && part_w != nullptr) {
      // The usual case (an affine norm whose input and weight both want gradients): one
      // call, with one pass fewer, for what the three calls below compute.
      lv.nn->layer_norm_backward_sums(dt, part_w, part_b, scratch, g, x, a.weight, d.n, mu, r,
                                      &sum_gw, &sum_gwc);
      gw = scratch;
    } else {
      if (part_w != nullptr || part_b != nullptr) {
        lv.nn->layer_norm_param_sums(dt, part_w, part_b, g, x, d.n, mu, r);
      }
      if (a.gin == nullptr) continue;
      if (a.weight != nullptr) {
        lv.nn->scaled_grad(dt, scratch, g, a.weight, d.n);
        gw = scratch;
      }
      lv.nn->grad_sums(dt, gw, x, d.n, mu, &sum_gw, &sum_gwc);
    }
    const double c[4] = {mu, r, d.rms ? T(0) : static_cast<T>(sum_gw / count),
                         static_cast<T>(sum_gwc / count * r * r)};
    lv.nn->layer_norm_input_grad(dt, a.gin + i * d.n, gw, x, d.n, c);
  }
}

template <typename T>
void run_backward(const Levels& lv, DType dt, const NormRows& d, const BackwardArgs<T>& a) {
  const bool params = a.gw != nullptr || a.gb != nullptr;
  const int64_t rows = block_rows(d.m);
  const int64_t blocks = (d.m + rows - 1) / rows;
  const size_t n = static_cast<size_t>(d.n);
  // Partial sums of each block, [blocks, n] per wanted gradient.
  std::vector<double> part_w(a.gw != nullptr ? blocks * n : 0);
  std::vector<double> part_b(a.gb != nullptr ? blocks * n : 0);
  parallel_for(0, blocks, grain_rows(rows * d.n), [&](int64_t b, int64_t e) {
    std::vector<T> scratch(a.gin != nullptr && a.weight != nullptr ? n : 0);
    for (int64_t k = b; k < e; ++k) {
      backward_rows(lv, dt, d, a, k * rows, std::min(d.m, (k + 1) * rows),
                    part_w.empty() ? nullptr : part_w.data() + k * n,
                    part_b.empty() ? nullptr : part_b.data() + k * n, scratch.data());
    }
  });
  if (!params) return;
  // Blocks in order; no rows (m == 0) leave zeros, the sum over nothing.
  auto fold = [&](const std::vector<double>& part, T* out) {
    if (out == nullptr) return;
    std::vector<double> acc(n, 0.0);
    for (int64_t k = 0; k < blocks; ++k) {
      const double* p = part.data() + k * n;
      for (size_t j = 0; j < n; ++j) acc[j] += p[j];
    }
    for (size_t j = 0; j < n; ++j) out[j] = static_cast<T>(acc[j]);
  };
  fold(part_w, a.gw);
  fold(part_b, a.gb);
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
        for (int64_t i = first; i < last; ++i) {
          forward_row<T>(lv, dt, d, eps, i, static_cast<T*>(o), static_cast<T*>(mn),
                         static_cast<T*>(rs), static_cast<const T*>(x),
                         static_cast<const T*>(w), static_cast<const T*>(b));
        }
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

// reduce (sum / max / min over the dims out keeps at size 1), arg_reduce and cumsum along
// a dim, on the host. cumsum sums each line left to right in double, one line per thread
// (a scan over an outer dim: a row of lines at a time through the level's column loop).
//
// Each output element owns its accumulator, so sums stay in double for float32 and the
// order of accumulation is fixed: rows of the reduced dims in row-major order, contiguous
// rows in blocks of kSumBlock through the level's loops (kernels/host/loops.h), blocks
// added in order. Nothing in that order depends on the level or the thread count.
// Two walks: per output (kept dims outer, reduced dims an inner loop: right for reductions
// over inner dims), and by columns (a row of accumulators filled in `in`'s memory order:
// right for reductions over outer dims). Threads split the outputs (each output is
// computed whole by one thread), or, for a single output over one contiguous row, the
// blocks, whose partial results are then combined in order.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/host/host_kernels.h"
#include "kernels/host/loops.h"
#include "kernels/host/parallel.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// Once a NaN is picked no comparison replaces it (the level loops pick alike).
template <typename T>
T pick(bool is_max, T acc, T v) {
  return (is_max ? v > acc : v < acc) || v != v ? v : acc;
}

// A sum that met a NaN is the one quiet NaN: which NaN an addition of two NaNs keeps
// depends on the operand order the compiler picked, which differs between levels.
double canonical(double sum) {
  return sum != sum ? std::numeric_limits<double>::quiet_NaN() : sum;
}

// The blocks of a contiguous row of n elements.
int64_t blocks_of(int64_t n) { return (n + kSumBlock - 1) / kSumBlock; }

template <typename T>
double block_sum(const Loops& lp, const T* row, int64_t n, int64_t block) {
  const int64_t at = block * kSumBlock;
  return lp.sum_block(DTypeOf<T>::value, row + at, std::min(kSumBlock, n - at));
}

// The extreme of one block, on its own (it starts from the block's first element), so
// that blocks can be computed in parallel and folded in order.
template <typename T>
T block_extreme(const Loops& lp, bool is_max, const T* row, int64_t n, int64_t block) {
  const int64_t at = block * kSumBlock;
  T acc = row[at];
  lp.extreme(is_max, DTypeOf<T>::value, row + at, std::min(kSumBlock, n - at), &acc);
  return acc;
}

// Sums accumulate in double whatever T is.
template <typename T>
double sum_over(const Loops& lp, const Layout<1>& r, const T* base) {
  double acc = 0;
  for_each_row(r, [&](const int64_t* off, int64_t n, const int64_t* step) {
    const T* p = base + off[0];
    if (step[0] == 1) {
      for (int64_t b = 0; b < blocks_of(n); ++b) acc += block_sum(lp, p, n, b);
    } else {
      for (int64_t i = 0; i < n; ++i) acc += p[i * step[0]];
    }
  });
  return acc;
}

template <typename T>
T extreme_over(const Loops& lp, bool is_max, const Layout<1>& r, const T* base) {
  T acc = *base;
  for_each_row(r, [&](const int64_t* off, int64_t n, const int64_t* step) {
    const T* p = base + off[0];
    if (step[0] == 1) {
      for (int64_t b = 0; b < blocks_of(n); ++b) {
        acc = pick(is_max, acc, block_extreme(lp, is_max, p, n, b));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) acc = pick(is_max, acc, p[i * step[0]]);
    }
  });
  return acc;
}

// Outputs in flat range [begin, end) of `kept`, each from inner(pointer into in).
template <typename T, typename Inner>
void reduce_rows(const Layout<2>& kept, T* o0, const T* x0, int64_t begin, int64_t end,
                 Inner inner) {
  for_each_row_range(kept, begin, end,
                          [&](const int64_t* off, int64_t n, const int64_t* step) {
    for (int64_t j = 0; j < n; ++j) {
      o0[off[0] + j * step[0]] = static_cast<T>(inner(x0 + off[1] + j * step[1]));
    }
  });
}

// For reductions over outer dims (a bias gradient: [B, N] -> [1, N]) reduce_rows would
// stride across rows of `in` for every output. When each kept row is contiguous in `in`,
// walking it in memory order into a row of accumulators is many times faster.
template <typename T, typename Acc>
void reduce_columns(const Loops& lp, Reduce op, const Layout<2>& kept, const Layout<1>& red,
                    T* o0, const T* x0, Acc init, int64_t begin, int64_t end) {
  std::vector<Acc> acc;
  for_each_row_range(kept, begin, end,
                          [&](const int64_t* off, int64_t n, const int64_t* step) {
    acc.assign(static_cast<size_t>(n), init);
    for_each_row(red, [&](const int64_t* roff, int64_t rn, const int64_t* rstep) {
      for (int64_t r = 0; r < rn; ++r) {
        lp.columns(op, DTypeOf<T>::value, acc.data(), x0 + off[1] + roff[0] + r * rstep[0], n);
      }
    });
    for (int64_t j = 0; j < n; ++j) {
      o0[off[0] + j * step[0]] =
          static_cast<T>(op == Reduce::kSum ? canonical(static_cast<double>(acc[j])) : acc[j]);
    }
  });
}

// One output over one long contiguous row: blocks in parallel, folded in order.
template <typename T>
T reduce_one_row(const Loops& lp, Reduce op, const T* row, int64_t n) {
  const int64_t blocks = blocks_of(n);
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / kSumBlock);
  if (op == Reduce::kSum) {
    std::vector<double> part(static_cast<size_t>(blocks));
    parallel_for(0, blocks, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) part[i] = block_sum(lp, row, n, i);
    });
    double acc = 0;
    for (double v : part) acc += v;
    return static_cast<T>(canonical(acc));
  }
  const bool is_max = op == Reduce::kMax;
  std::vector<T> part(static_cast<size_t>(blocks));
  parallel_for(0, blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) part[i] = block_extreme(lp, is_max, row, n, i);
  });
  T acc = row[0];
  for (T v : part) acc = pick(is_max, acc, v);
  return acc;
}

template <typename T>
void run_reduce(const Loops& lp, Reduce op, const Layout<2>& kept, const Layout<1>& red,
                void* out, const void* in) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(in);
  const bool is_max = op == Reduce::kMax;
  if (kept.numel == 1 && red.ndim == 1 && red.strides[0][0] == 1) {
    *o = reduce_one_row<T>(lp, op, x, red.sizes[0]);
    return;
  }
  // Outputs per chunk such that a chunk reads about kParallelGrain elements.
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, red.numel));
  const bool columns = kept.ndim > 0 && kept.strides[1][kept.ndim - 1] == 1 &&
                       red.ndim > 0 && red.strides[0][red.ndim - 1] != 1;
  if (columns) {
    const T inf = std::numeric_limits<T>::infinity();
    parallel_for(0, kept.numel, grain, [&](int64_t b, int64_t e) {
      if (op == Reduce::kSum) return reduce_columns<T, double>(lp, op, kept, red, o, x, 0.0, b, e);
      reduce_columns<T, T>(lp, op, kept, red, o, x, is_max ? -inf : inf, b, e);
    });
    return;
  }
  parallel_for(0, kept.numel, grain, [&](int64_t b, int64_t e) {
    if (op == Reduce::kSum) {
      return reduce_rows(kept, o, x, b, e,
                         [&](const T* p) { return canonical(sum_over(lp, red, p)); });
    }
    reduce_rows(kept, o, x, b, e,
                [&](const T* p) { return extreme_over(lp, is_max, red, p); });
  });
}

}  // namespace

void reduce(const Stream& stream, const LaunchSpec& spec, Reduce op, DType dt,
            const Layout<2>& kept_layout, const Layout<1>& red_layout, void* o, const void* x) {
  const Loops* lp = &loops();
  dispatch::enqueue(
      stream, spec,
      [op, o, x, dt, lp](const Layout<2>& kept, const Layout<1>& red) {
        dispatch_floating(dt, [&](auto t) { run_reduce<decltype(t)>(*lp, op, kept, red, o, x); });
      },
      kept_layout, red_layout);
}

void arg_reduce(const Stream& stream, const LaunchSpec& spec, bool is_max, DType dt,
                const Layout<3>& layout, int64_t n, int64_t stride, void* pv, int64_t* pi,
                const void* px) {
  dispatch::enqueue(
      stream, spec,
      [n, stride, is_max, pv, pi, px, dt](const Layout<3>& l) {
        dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          T* v0 = static_cast<T*>(pv);
          int64_t* i0 = static_cast<int64_t*>(pi);
          const T* x0 = static_cast<const T*>(px);
          for_each_row(l, [&](const int64_t* off, int64_t rows, const int64_t* step) {
            for (int64_t j = 0; j < rows; ++j) {
              const T* x = x0 + off[2] + j * step[2];
              T best = x[0];
              int64_t at = 0;
              // Strict comparisons keep the first of equal values; the first NaN wins and
              // nothing replaces it.
              for (int64_t k = 1; k < n && best == best; ++k) {
                const T v = x[k * stride];
                if ((is_max ? v > best : v < best) || v != v) {
                  best = v;
                  at = k;
                }
              }
              v0[off[0] + j * step[0]] = best;
              i0[off[1] + j * step[1]] = at;
            }
          });
        });
      },
      layout);
}

namespace {

// cumsum of the lines of `lines` that start in [b, e), each line on its own, in order.
template <typename T>
void scan_lines(const Layout<2>& lines, int64_t n, int64_t out_step, int64_t in_step, T* o0,
                const T* x0, int64_t b, int64_t e) {
  for_each_row_range(lines, b, e, [&](const int64_t* off, int64_t m, const int64_t* st) {
    for (int64_t j = 0; j < m; ++j) {
      T* o = o0 + off[0] + j * st[0];
      const T* x = x0 + off[1] + j * st[1];
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        acc += static_cast<double>(x[k * in_step]);
        o[k * out_step] = static_cast<T>(acc);
      }
    }
  });
}

// The same where each row of `lines` is m side-by-side lines, contiguous in out and in (a
// scan over an outer dim): a row of m double accumulators advanced one step of the scan at
// a time through the level's column loop. Each accumulator adds its line's elements in
// order, exactly as scan_lines does, so both give the same bits.
template <typename T>
void scan_columns(const Loops& lp, DType dt, const Layout<2>& lines, int64_t n,
                  int64_t out_step, int64_t in_step, T* o0, const T* x0, int64_t row_b,
                  int64_t row_e) {
  const int64_t m = lines.sizes[lines.ndim - 1];
  std::vector<double> acc(static_cast<size_t>(m));
  for (int64_t r = row_b; r < row_e; ++r) {
    auto row = [&](const int64_t* off, int64_t, const int64_t*) {
      T* o = o0 + off[0];
      const T* x = x0 + off[1];
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < n; ++k) {
        lp.columns(Reduce::kSum, dt, acc.data(), x + k * in_step, m);
        T* ok = o + k * out_step;
        for (int64_t j = 0; j < m; ++j) ok[j] = static_cast<T>(acc[j]);
      }
    };
    for_each_row_range(lines, r * m, (r + 1) * m, row);
  }
}

}  // namespace

void cumsum(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<2>& layout,
            int64_t n, int64_t out_step, int64_t in_step, void* po, const void* px) {
  const Loops* lp = &loops();
  dispatch::enqueue(
      stream, spec,
      [n, out_step, in_step, po, px, dt, lp](const Layout<2>& lines) {
        dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          T* o0 = static_cast<T*>(po);
          const T* x0 = static_cast<const T*>(px);
          // Work per chunk of about kParallelGrain elements; a line (or a row of lines) is
          // summed whole by one thread, so the split never changes a bit.
          const int64_t last = lines.ndim - 1;
          const bool columns = lines.ndim > 0 && lines.strides[0][last] == 1 &&
                               lines.strides[1][last] == 1;
          if (columns) {
            const int64_t m = lines.sizes[last];
            const int64_t grain = std::max<int64_t>(1, kParallelGrain / (n * m));
            parallel_for(0, lines.numel / m, grain, [&](int64_t b, int64_t e) {
              scan_columns<T>(*lp, dt, lines, n, out_step, in_step, o0, x0, b, e);
            });
            return;
          }
          const int64_t grain = std::max<int64_t>(1, kParallelGrain / n);
          parallel_for(0, lines.numel, grain, [&](int64_t b, int64_t e) {
            scan_lines<T>(lines, n, out_step, in_step, o0, x0, b, e);
          });
        });
      },
      layout);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

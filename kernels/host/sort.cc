// sort / topk and multinomial sampling on the host. sort: each slice's (value, position)
// pairs are ordered with SortOrder (kernels/functors/sort_ops.h), a strict total order, so
// std::partial_sort (k < n) and std::sort give the one stable result; slices are split
// over threads. multinomial: each row's running sums in double, then a binary search per
// draw for the first sum above u * total, which is the category multinomial_pick (the
// cuda kernel's linear scan) returns.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/functors/random_ops.h"
#include "kernels/functors/sort_ops.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/parallel.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// Each slice is copied into (value, position) pairs first: the sort then compares
// contiguous pairs rather than loading strided elements through an index.
template <typename T>
void sort_slices(const SortArgs& a, T* values, int64_t* indices, const T* in, int64_t begin,
                 int64_t end) {
  const SortOrder<T> order{a.descending};
  auto before = [&](const std::pair<T, int64_t>& p, const std::pair<T, int64_t>& q) {
    return order(p.first, p.second, q.first, q.second);
  };
  std::vector<std::pair<T, int64_t>> slice(static_cast<size_t>(a.n));
  for_each_row_range(a.walk, begin, end, [&](const int64_t* off, int64_t rows,
                                             const int64_t* step) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = in + off[2] + r * step[2];
      for (int64_t i = 0; i < a.n; ++i) slice[static_cast<size_t>(i)] = {x[i * a.in_step], i};
      if (a.k < a.n) {
        std::partial_sort(slice.begin(), slice.begin() + a.k, slice.end(), before);
      } else {
        std::sort(slice.begin(), slice.end(), before);
      }
      T* v = values + off[0] + r * step[0];
      int64_t* ix = indices + off[1] + r * step[1];
      for (int64_t j = 0; j < a.k; ++j) {
        v[j * a.values_step] = slice[static_cast<size_t>(j)].first;
        ix[j * a.indices_step] = slice[static_cast<size_t>(j)].second;
      }
    }
  });
}

template <typename T>
void draw_rows(const MultinomialArgs& a, int64_t* out, const T* probs, int64_t begin,
               int64_t end) {
  const RandomKey key = make_random_key(a.seed);
  std::vector<double> run(static_cast<size_t>(a.categories));
  for (int64_t r = begin; r < end; ++r) {
    const T* p = probs + r * a.row_stride;
    double total = 0;
    int64_t last = 0;
    for (int64_t i = 0; i < a.categories; ++i) {
      const double w = static_cast<double>(p[i * a.category_stride]);
      total += w;
      if (w > 0) last = i;
      run[static_cast<size_t>(i)] = total;
    }
    for (int64_t s = 0; s < a.samples; ++s) {
      const uint64_t counter = a.offset + static_cast<uint64_t>(r * a.samples + s);
      const double target = random_unit(random_bits(key, counter)) * total;
      const auto it = std::upper_bound(run.begin(), run.end(), target);
      out[r * a.samples + s] = it == run.end() ? last : it - run.begin();
    }
  }
}

}  // namespace

void sort(const Stream& stream, const LaunchSpec& spec, DType dt, const SortArgs& args,
          void* values, int64_t* indices, const void* in) {
  dispatch::enqueue(
      stream, spec,
      [dt, values, indices, in](const SortArgs& a) {
        const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, a.n));
        parallel_for(0, a.walk.numel, grain, [&](int64_t b, int64_t e) {
          if (dt == DType::kInt64) {
            return sort_slices(a, static_cast<int64_t*>(values), indices,
                               static_cast<const int64_t*>(in), b, e);
          }
          dispatch_floating(dt, [&](auto t) {
            using T = decltype(t);
            sort_slices(a, static_cast<T*>(values), indices, static_cast<const T*>(in), b, e);
          });
        });
      },
      args);
}

void multinomial(const Stream& stream, const LaunchSpec& spec, DType dt,
                 const MultinomialArgs& args, int64_t* out, const void* probs) {
  dispatch::enqueue(
      stream, spec,
      [dt, out, probs](const MultinomialArgs& a) {
        const int64_t grain =
            std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, a.categories + a.samples));
        parallel_for(0, a.rows, grain, [&](int64_t b, int64_t e) {
          dispatch_floating(dt, [&](auto t) {
            draw_rows(a, out, static_cast<const decltype(t)*>(probs), b, e);
          });
        });
      },
      args);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

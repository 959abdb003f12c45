// sort / topk and multinomial sampling on cuda streams (kernels/cuda/cuda_kernels.h),
// kept simple and shared with the host through kernels/functors/sort_ops.h.
// sort: one thread per (slice, element) counts the elements that come before its own in
// SortOrder, a strict total order, so that count is the element's place and the result
// equals the host's exactly; O(n^2) comparisons per slice of n, fine for the short dims
// topk and sort usually see, slow for very long ones.
// multinomial: one thread per draw, multinomial_pick's scan over its row (the host's
// binary search finds the same category).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/functors/random_ops.h"
#include "kernels/functors/sort_ops.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/kernel_launch.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sort_kernel(Indexer<3, int64_t> walk, SortArgs a, int64_t total, T* values,
                int64_t* indices, const T* in) {
  const SortOrder<T> order{a.descending};
  SG_GRID_LOOP(t, total) {
    const int64_t slice = t / a.n;
    const int64_t j = t - slice * a.n;
    int64_t off[3];
    walk.offsets(slice, off);
    const T* x = in + off[2];
    const T v = x[j * a.in_step];
    int64_t place = 0;
    for (int64_t m = 0; m < a.n; ++m) place += order(x[m * a.in_step], m, v, j) ? 1 : 0;
    if (place < a.k) {
      values[off[0] + place * a.values_step] = v;
      indices[off[1] + place * a.indices_step] = j;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    multinomial_kernel(MultinomialArgs a, int64_t* out, const T* probs) {
  const RandomKey key = make_random_key(a.seed);
  SG_GRID_LOOP(t, a.rows * a.samples) {
    const int64_t r = t / a.samples;
    const T* p = probs + r * a.row_stride;
    double total = 0;
    for (int64_t i = 0; i < a.categories; ++i) {
      total += static_cast<double>(p[i * a.category_stride]);
    }
    const double u = random_unit(random_bits(key, a.offset + static_cast<uint64_t>(t)));
    out[t] = multinomial_pick(p, a.category_stride, a.categories, total, u);
  }
}

template <typename T>
void launch_sort(const Stream& stream, const SortArgs& a, void* values, int64_t* indices,
                 const void* in) {
  const int64_t total = a.walk.numel * a.n;
  launch_kernel("sort / topk on cuda", SG_KERNEL(sort_kernel<T>), blocks_for(total), kThreads,
                raw_cuda_stream(stream), make_indexer<int64_t>(a.walk), a, total,
                static_cast<T*>(values), indices, static_cast<const T*>(in));
}

}  // namespace

void sort(const Stream& stream, DType dt, const SortArgs& a, void* values, int64_t* indices,
          const void* in) {
  if (a.walk.numel == 0 || a.k == 0) return;
  if (dt == DType::kFloat32) {
    launch_sort<float>(stream, a, values, indices, in);
  } else if (dt == DType::kFloat64) {
    launch_sort<double>(stream, a, values, indices, in);
  } else {
    launch_sort<int64_t>(stream, a, values, indices, in);
  }
}

void multinomial(const Stream& stream, DType dt, const MultinomialArgs& a, int64_t* out,
                 const void* probs) {
  const int64_t total = a.rows * a.samples;
  if (total == 0) return;
  if (dt == DType::kFloat32) {
    launch_kernel("multinomial on cuda", SG_KERNEL(multinomial_kernel<float>), blocks_for(total),
                  kThreads, raw_cuda_stream(stream), a, out, static_cast<const float*>(probs));
  } else {
    launch_kernel("multinomial on cuda", SG_KERNEL(multinomial_kernel<double>), blocks_for(total),
                  kThreads, raw_cuda_stream(stream), a, out, static_cast<const double*>(probs));
  }
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

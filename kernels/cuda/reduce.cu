// reduce (sum, max, min), arg_reduce and cumsum on cuda streams (cuda_kernels.h): one
// block of kThreads per output, each thread folding every kThreads-th reduced element,
// then a tree over the block in shared memory. The order is fixed by the thread layout,
// so a result does not change from run to run; it differs from the cpu's lane order
// within rounding (sums accumulate in double for float32, as on cpu). Lines of at most
// kShortLine elements (a softmax over a short dim, a norm over few features) take one
// thread per output instead: a block per output would leave all but a few of its threads
// idle and spend its time in barriers. cumsum always runs one thread per line, in the
// host's order, so its bits equal the host's.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/indexing.cuh"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/kernel_launch.h"
#include "runtime/cudaemu/kernel_spellings.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

// The running value of one reduction: a sum, or the max / min where a NaN wins and stays.
template <typename A>
struct Combine {
  Reduce op;
  __device__ __forceinline__ A operator()(A acc, A v) const {
    if (op == Reduce::kSum) return acc + v;
    const bool take = (op == Reduce::kMax ? v > acc : v < acc) || v != v;
    return take && acc == acc ? v : acc;
  }
};

constexpr int64_t kShortLine = 32;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_short_kernel(Indexer<2, int64_t> kept, int64_t outputs, Indexer<1, int64_t> red,
                        int64_t n, Reduce op, T* out, const T* in) {
  using A = typename Acc<T>::type;
  const Combine<A> combine{op};
  SG_GRID_LOOP(o, outputs) {
    int64_t base[2];
    kept.offsets(o, base);
    const T* x = in + base[1];
    A acc = op == Reduce::kSum || n == 0 ? A(0) : A(x[0]);
    for (int64_t j = 0; j < n; ++j) {
      int64_t off[1];
      red.offsets(j, off);
      acc = combine(acc, A(x[off[0]]));
    }
    out[base[0]] = op == Reduce::kSum && acc != acc ? T(NAN) : T(acc);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(Indexer<2, int64_t> kept, int64_t outputs, Indexer<1, int64_t> red,
                  int64_t n, Reduce op, T* out, const T* in) {
  using A = typename Acc<T>::type;
  SG_SHARED_ARRAY(A, part, kThreads);
  const Combine<A> combine{op};
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t base[2];
    kept.offsets(o, base);
    const T* x = in + base[1];
    // Max and min start from their first element (n > 0 for them), sums from 0.
    A acc = op == Reduce::kSum || n == 0 ? A(0) : A(x[0]);
    for (int64_t j = threadIdx.x; j < n; j += kThreads) {
      int64_t off[1];
      red.offsets(j, off);
      acc = combine(acc, A(x[off[0]]));
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) part[threadIdx.x] = combine(part[threadIdx.x], part[threadIdx.x + w]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const A r = part[0];
      // One NaN bit pattern for sums, as the cpu kernel writes.
      out[base[0]] = op == Reduce::kSum && r != r ? T(NAN) : T(r);
    }
    __syncthreads();
  }
}

// (value, index) pairs along one dim: the larger (smaller) value wins, a NaN beats any
// number, and of two equal values or two NaNs the lower index wins, so the tree finds the
// first extreme as the cpu's scan does.
template <typename T>
struct ArgPick {
  bool is_max;
  __device__ __forceinline__ bool better(T v, int64_t i, T best, int64_t at) const {
    if (at < 0) return true;
    const bool v_nan = v != v, best_nan = best != best;
    if (v_nan || best_nan) return v_nan && (!best_nan || i < at);
    if (v == best) return i < at;
    return is_max ? v > best : v < best;
  }
};

// The line scanned left to right keeps the first extreme, as the cpu's scan does.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    arg_reduce_short_kernel(Indexer<3, int64_t> l, int64_t outputs, int64_t n, int64_t stride,
                            bool is_max, T* values, int64_t* indices, const T* in) {
  const ArgPick<T> pick{is_max};
  SG_GRID_LOOP(o, outputs) {
    int64_t off[3];
    l.offsets(o, off);
    const T* x = in + off[2];
    T bv = 0;
    int64_t bi = -1;
    for (int64_t k = 0; k < n; ++k) {
      const T v = x[k * stride];
      if (pick.better(v, k, bv, bi)) {
        bv = v;
        bi = k;
      }
    }
    values[off[0]] = bv;
    indices[off[1]] = bi;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    arg_reduce_kernel(Indexer<3, int64_t> l, int64_t outputs, int64_t n, int64_t stride,
                      bool is_max, T* values, int64_t* indices, const T* in) {
  SG_SHARED_ARRAY(T, best_v, kThreads);
  SG_SHARED_ARRAY(int64_t, best_i, kThreads);
  const ArgPick<T> pick{is_max};
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t off[3];
    l.offsets(o, off);
    const T* x = in + off[2];
    T bv = 0;
    int64_t bi = -1;
    for (int64_t k = threadIdx.x; k < n; k += kThreads) {
      const T v = x[k * stride];
      if (pick.better(v, k, bv, bi)) {
        bv = v;
        bi = k;
      }
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) {
        const int u = threadIdx.x + w;
        if (best_i[u] >= 0 && pick.better(best_v[u], best_i[u], best_v[threadIdx.x],
                                          best_i[threadIdx.x])) {
          best_v[threadIdx.x] = best_v[u];
          best_i[threadIdx.x] = best_i[u];
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      values[off[0]] = best_v[0];
      indices[off[1]] = best_i[0];
    }
    __syncthreads();
  }
}

// One thread per line, left to right in Acc (double for float32, as the host): the lines
// are independent, so the bits equal the host's.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cumsum_kernel(Indexer<2, int64_t> lines, int64_t count, int64_t n, int64_t out_step,
                  int64_t in_step, T* out, const T* in) {
  using A = typename Acc<T>::type;
  SG_GRID_LOOP(line, count) {
    int64_t off[2];
    lines.offsets(line, off);
    T* o = out + off[0];
    const T* x = in + off[1];
    A acc = 0;
    for (int64_t k = 0; k < n; ++k) {
      acc += static_cast<A>(x[k * in_step]);
      o[k * out_step] = static_cast<T>(acc);
    }
  }
}

// One block per output, capped (the kernels loop over outputs).
unsigned blocks_for_outputs(int64_t outputs) {
  return static_cast<unsigned>(outputs < kMaxBlocks ? outputs : kMaxBlocks);
}

}  // namespace

void reduce(const Stream& stream, Reduce op, DType dt, const cpu::Layout<2>& kept,
            const cpu::Layout<1>& red, void* out, const void* in) {
  if (kept.numel == 0) return;
  const Indexer<2, int64_t> k = make_indexer<int64_t>(kept);
  const Indexer<1, int64_t> r = make_indexer<int64_t>(red);
  const cudaStream_t s = raw_cuda_stream(stream);
  if (red.numel <= kShortLine) {
    if (dt == DType::kFloat32) {
      launch_kernel("reduce (sum, max or min) on cuda", SG_KERNEL(reduce_short_kernel<float>),
                    blocks_for(kept.numel), kThreads, s, k, kept.numel, r, red.numel, op,
                    static_cast<float*>(out), static_cast<const float*>(in));
    } else {
      launch_kernel("reduce (sum, max or min) on cuda", SG_KERNEL(reduce_short_kernel<double>),
                    blocks_for(kept.numel), kThreads, s, k, kept.numel, r, red.numel, op,
                    static_cast<double*>(out), static_cast<const double*>(in));
    }
    return;
  }
  if (dt == DType::kFloat32) {
    launch_kernel("reduce (sum, max or min) on cuda", SG_KERNEL(reduce_kernel<float>),
                  blocks_for_outputs(kept.numel), kThreads, s, k, kept.numel,
                  r, red.numel, op, static_cast<float*>(out), static_cast<const float*>(in));
  } else {
    launch_kernel("reduce (sum, max or min) on cuda", SG_KERNEL(reduce_kernel<double>),
                  blocks_for_outputs(kept.numel), kThreads, s, k, kept.numel,
                  r, red.numel, op, static_cast<double*>(out), static_cast<const double*>(in));
  }
}

void arg_reduce(const Stream& stream, bool is_max, DType dt, const cpu::Layout<3>& l,
                int64_t n, int64_t stride, void* values, int64_t* indices, const void* in) {
  if (l.numel == 0) return;
  const Indexer<3, int64_t> ix = make_indexer<int64_t>(l);
  if (n <= kShortLine) {
    const cudaStream_t s = raw_cuda_stream(stream);
    if (dt == DType::kFloat32) {
      launch_kernel("argmax / argmin on cuda", SG_KERNEL(arg_reduce_short_kernel<float>),
                    blocks_for(l.numel), kThreads, s, ix, l.numel, n, stride, is_max,
                    static_cast<float*>(values), indices, static_cast<const float*>(in));
    } else {
      launch_kernel("argmax / argmin on cuda", SG_KERNEL(arg_reduce_short_kernel<double>),
                    blocks_for(l.numel), kThreads, s, ix, l.numel, n, stride, is_max,
                    static_cast<double*>(values), indices, static_cast<const double*>(in));
    }
    return;
  }
  if (dt == DType::kFloat32) {
    launch_kernel("argmax / argmin on cuda", SG_KERNEL(arg_reduce_kernel<float>),
                  blocks_for_outputs(l.numel), kThreads, raw_cuda_stream(stream), ix, l.numel, n,
                  stride, is_max, static_cast<float*>(values), indices,
                  static_cast<const float*>(in));
  } else {
    launch_kernel("argmax / argmin on cuda", SG_KERNEL(arg_reduce_kernel<double>),
                  blocks_for_outputs(l.numel), kThreads, raw_cuda_stream(stream), ix, l.numel, n,
                  stride, is_max, static_cast<double*>(values), indices,
                  static_cast<const double*>(in));
  }
}

void cumsum(const Stream& stream, DType dt, const cpu::Layout<2>& lines, int64_t n,
            int64_t out_step, int64_t in_step, void* out, const void* in) {
  if (lines.numel == 0 || n == 0) return;
  const Indexer<2, int64_t> ix = make_indexer<int64_t>(lines);
  const cudaStream_t s = raw_cuda_stream(stream);
  if (dt == DType::kFloat32) {
    launch_kernel("cumsum on cuda", SG_KERNEL(cumsum_kernel<float>), blocks_for(lines.numel),
                  kThreads, s, ix, lines.numel, n, out_step, in_step, static_cast<float*>(out),
                  static_cast<const float*>(in));
  } else {
    launch_kernel("cumsum on cuda", SG_KERNEL(cumsum_kernel<double>), blocks_for(lines.numel),
                  kThreads, s, ix, lines.numel, n, out_step, in_step, static_cast<double*>(out),
                  static_cast<const double*>(in));
  }
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

// The index kernels (index_select, gather, index_add, scatter_add, scatter,
// scatter_reduce) on cuda streams (kernels/cuda/cuda_kernels.h): one kernel reads or
// accumulates through the index, after a check kernel has found every index in range.
//
// Out-of-range indices must never touch memory. A device-side assert would kill the CUDA
// context, so the check kernel records the first bad element (its row-major position and
// value) and the host reads it back before the main kernel is enqueued: a ValueError as on
// cpu, at the cost of one stream synchronisation per index launch.
// Accumulation uses atomicAdd (products, max and min a compare-and-swap loop): duplicate
// indices combine in no fixed order (as in PyTorch's cuda index_add), so sums and products
// with duplicates may differ from run to run within rounding.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/indexing.cuh"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/kernel_launch.h"
#include "runtime/memory/storage.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

// first[0]: the lowest position of a bad index (all ones: none); first[1] is written by
// the thread that owns that position, after every thread has passed the atomicMin.
__global__ void __launch_bounds__(kThreads)
    find_bad_index(Indexer<1, int64_t> ix, int64_t numel, const int64_t* index, int64_t low,
                   int64_t limit, unsigned long long* first) {
  SG_GRID_LOOP(i, numel) {
    int64_t off[1];
    ix.offsets(i, off);
    const int64_t v = index[off[0]];
    if (v < low || v >= limit) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

__global__ void read_bad_value(Indexer<1, int64_t> ix, const int64_t* index,
                               unsigned long long* first) {
  if (first[0] == ~0ull) return;
  int64_t off[1];
  ix.offsets(static_cast<int64_t>(first[0]), off);
  first[1] = static_cast<unsigned long long>(index[off[0]]);
}

void check_indices(const Stream& stream, const IndexArgs& a) {
  int64_t position = 0, value = 0;
  if (!first_bad_index(stream, a.name, a.index_layout, a.index, a.limit, &position, &value)) {
    return;
  }
  throw ValueError(absl::StrCat(a.name, ": index ", value, " (element ", position,
                                " of index, row-major) is out of range for dim ", a.dim,
                                " of size ", a.limit, "; valid indices are 0..", a.limit - 1));
}

// out[off0] = in[off1 + index[off2] * step] (read), or out[off0 + index[off2] * step] +=
// src[off1] (accumulate), or = src[off1] (assign: among duplicates one write wins, in no
// fixed order, as in the reference's scatter on cuda), or combined with src[off1] by an
// atomic read-modify-write (multiply, max, min), or = `fill` (the identity written first
// when scatter_reduce leaves self out).
enum class Mode { kRead, kAccumulate, kAssign, kMultiply, kMax, kMin, kFill };

// The combine of two values under `kMode` (max / min: a NaN wins and stays).
template <Mode kMode, typename T>
__device__ __forceinline__ T combined(T o, T v) {
  if constexpr (kMode == Mode::kMultiply) {
    return o * v;
  } else if constexpr (kMode == Mode::kMax) {
    return (v > o || v != v) && o == o ? v : o;
  } else {
    return (v < o || v != v) && o == o ? v : o;
  }
}

// Atomic `*p = combined(*p, v)` through compare-and-swap on the value's bits (cuda has no
// atomic multiply, and no floating max / min).
template <Mode kMode>
__device__ void atomic_combine(float* p, float v) {
  auto* bits = reinterpret_cast<unsigned int*>(p);
  unsigned int old = *bits, seen;
  do {
    seen = old;
    const float next = combined<kMode>(__uint_as_float(seen), v);
    if (__float_as_uint(next) == seen) return;
    old = atomicCAS(bits, seen, __float_as_uint(next));
  } while (old != seen);
}

template <Mode kMode>
__device__ void atomic_combine(double* p, double v) {
  auto* bits = reinterpret_cast<unsigned long long*>(p);
  unsigned long long old = *bits, seen;
  do {
    seen = old;
    const double next = combined<kMode>(__longlong_as_double(static_cast<long long>(seen)), v);
    const auto next_bits = static_cast<unsigned long long>(__double_as_longlong(next));
    if (next_bits == seen) return;
    old = atomicCAS(bits, seen, next_bits);
  } while (old != seen);
}

template <typename T, Mode kMode>
__global__ void __launch_bounds__(kThreads)
    indexed_kernel(Indexer<3, int64_t> ix, int64_t numel, T* out, const T* other,
                   const int64_t* index, int64_t step, T fill) {
  SG_GRID_LOOP(i, numel) {
    int64_t off[3];
    ix.offsets(i, off);
    const int64_t at = index[off[2]] * step;
    if constexpr (kMode == Mode::kAccumulate) {
      atomicAdd(out + off[0] + at, other[off[1]]);
    } else if constexpr (kMode == Mode::kAssign) {
      out[off[0] + at] = other[off[1]];
    } else if constexpr (kMode == Mode::kFill) {
      out[off[0] + at] = fill;
    } else if constexpr (kMode == Mode::kRead) {
      out[off[0]] = other[off[1] + at];
    } else {
      atomic_combine<kMode>(out + off[0] + at, other[off[1]]);
    }
  }
}

template <Mode kMode, typename T>
void run(const Stream& stream, const IndexArgs& a, T fill = T(0)) {
  const Indexer<3, int64_t> ix = make_indexer<int64_t>(a.walk);
  const int64_t n = a.walk.numel;
  launch_kernel(a.name, SG_KERNEL(indexed_kernel<T, kMode>), blocks_for(n), kThreads,
                raw_cuda_stream(stream), ix, n, static_cast<T*>(a.out),
                static_cast<const T*>(a.other), a.index, a.step, fill);
}

// The accumulating kernels of one floating type: the identity first where self is left
// out, then the combine.
template <typename T>
void accumulate(const Stream& stream, const IndexArgs& a) {
  const T inf = std::numeric_limits<T>::infinity();
  if (!a.include_self) {
    T id = T(0);
    if (a.combine == IndexCombine::kMultiply) id = T(1);
    if (a.combine == IndexCombine::kMax) id = -inf;
    if (a.combine == IndexCombine::kMin) id = inf;
    run<Mode::kFill, T>(stream, a, id);
  }
  switch (a.combine) {
    case IndexCombine::kAdd: return run<Mode::kAccumulate, T>(stream, a);
    case IndexCombine::kAssign: return run<Mode::kAssign, T>(stream, a);
    case IndexCombine::kMultiply: return run<Mode::kMultiply, T>(stream, a);
    case IndexCombine::kMax: return run<Mode::kMax, T>(stream, a);
    case IndexCombine::kMin: return run<Mode::kMin, T>(stream, a);
  }
}

// out[off0] = linear_step(accumulate ? out[off0] : 0, index[off1], size, stride).
__global__ void __launch_bounds__(kThreads)
    linear_kernel(Indexer<2, int64_t> ix, int64_t numel, int64_t* out, const int64_t* index,
                  int64_t size, int64_t stride, bool accumulate) {
  SG_GRID_LOOP(i, numel) {
    int64_t off[2];
    ix.offsets(i, off);
    out[off[0]] = linear_step(accumulate ? out[off[0]] : 0, index[off[1]], size, stride);
  }
}

}  // namespace

bool first_bad_index(const Stream& stream, const char* name, const cpu::Layout<1>& layout,
                     const int64_t* index, int64_t limit, int64_t* position, int64_t* value) {
  return first_bad_index_in(stream, name, layout, index, 0, limit, position, value);
}

bool first_bad_index_in(const Stream& stream, const char* name, const cpu::Layout<1>& layout,
                        const int64_t* index, int64_t low, int64_t limit, int64_t* position,
                        int64_t* value) {
  if (layout.numel == 0) return false;
  const cudaStream_t s = raw_cuda_stream(stream);
  Storage flag = Storage::allocate(2 * sizeof(unsigned long long), stream);
  auto* first = static_cast<unsigned long long*>(flag.data());
  check_cuda(cudaMemsetAsync(first, 0xFF, 2 * sizeof(unsigned long long), s), name);
  const Indexer<1, int64_t> ix = make_indexer<int64_t>(layout);
  launch_kernel(name, SG_KERNEL(find_bad_index), blocks_for(layout.numel), kThreads, s, ix,
                layout.numel, index, low, limit, first);
  launch_kernel(name, SG_KERNEL(read_bad_value), 1, 1, s, ix, index, first);
  unsigned long long host[2];
  check_cuda(cudaMemcpyAsync(host, first, sizeof host, cudaMemcpyDeviceToHost, s), name);
  check_cuda(cudaStreamSynchronize(s), name);
  if (host[0] == ~0ull) return false;
  *position = static_cast<int64_t>(host[0]);
  *value = static_cast<int64_t>(host[1]);
  return true;
}

void index_read(const Stream& stream, DType dt, const IndexArgs& a) {
  if (a.walk.numel == 0) return;
  check_indices(stream, a);
  switch (dt) {
    case DType::kFloat32: return run<Mode::kRead, float>(stream, a);
    case DType::kFloat64: return run<Mode::kRead, double>(stream, a);
    case DType::kInt64: return run<Mode::kRead, int64_t>(stream, a);
    case DType::kBool: return run<Mode::kRead, uint8_t>(stream, a);
    case DType::kFloat16:
    case DType::kBFloat16:
      break;
  }
  // The front door widens 16-bit views for cuda (kernels/index.cc).
  throw DeviceError(absl::StrCat(a.name, " on cuda: ", dtype_name(dt),
                                 " reached the kernel unwidened; this is a bug in "
                                 "streamgrad's kernel front door, please report it"));
}

void index_accumulate(const Stream& stream, DType dt, const IndexArgs& a) {
  if (a.walk.numel == 0) return;
  check_indices(stream, a);
  if (dt == DType::kFloat32) return accumulate<float>(stream, a);
  accumulate<double>(stream, a);
}

void index_linear(const Stream& stream, const cpu::Layout<2>& l, int64_t* out,
                  const int64_t* index, int64_t size, int64_t stride, bool accumulate) {
  if (l.numel == 0) return;
  const Indexer<2, int64_t> ix = make_indexer<int64_t>(l);
  launch_kernel("index_linear", SG_KERNEL(linear_kernel), blocks_for(l.numel), kThreads,
                raw_cuda_stream(stream), ix, l.numel, out, index, size, stride, accumulate);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

// Internal to kernels/cuda: flat row-major indices to operand offsets over a cpu::Layout
// (the one piece of index arithmetic every cuda kernel here shares), grid sizes, the
// accumulator type of sums, and the block-wide sum of the normalisation kernels.
//
// Thread-safety: plain values. Failure: none (callers keep indices below numel).
#ifndef STREAMGRAD_KERNELS_CUDA_INDEXING_CUH_
#define STREAMGRAD_KERNELS_CUDA_INDEXING_CUH_

#include <cstdint>

#include "kernels/dispatch/strided.h"
#include "kernels/functors/convert.h"
#include "runtime/base/half.h"
#include "runtime/backend/stream.h"

namespace streamgrad {
namespace kernels {
namespace cuda {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; grid-stride loops cover the
// rest, and the cap keeps `i + step` far from the 32-bit limit. The interpreted device
// runs every thread of every block on the CPU: there a small cap keeps launches short, and
// makes tensors of a few thousand elements take the grid-stride paths that only very
// large ones reach on a GPU.
#if defined(STREAMGRAD_CUDA_EMULATED)
constexpr int64_t kMaxBlocks = 1 << 4;
#else
constexpr int64_t kMaxBlocks = 1 << 16;
#endif
// The 32-bit path: every index and offset below 2^30, so i + step (at most 2^24) cannot
// overflow an int32.
constexpr int64_t kMax32 = int64_t(1) << 30;

// The layout's merged dims and each operand's strides (in elements), as Index.
template <int N, typename Index>
struct Indexer {
  int ndim;
  Index sizes[cpu::kMaxDims];
  Index strides[N][cpu::kMaxDims];

  // Operand offsets of flat row-major index i (the last dim fastest), i below numel.
  __device__ __forceinline__ void offsets(Index i, Index (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const Index q = i / sizes[d];
      const Index r = i - q * sizes[d];
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
    }
    // What is left of i is the outermost dim's index (i < numel): no division there, so a
    // merged 1-D layout (every contiguous operand) costs none per element.
    if (ndim > 0) {
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += i * strides[k][0];
    }
  }
};

template <typename Index, int N>
Indexer<N, Index> make_indexer(const cpu::Layout<N>& l) {
  Indexer<N, Index> ix{};
  ix.ndim = l.ndim;
  for (int d = 0; d < l.ndim; ++d) {
    ix.sizes[d] = static_cast<Index>(l.sizes[d]);
    for (int k = 0; k < N; ++k) ix.strides[k][d] = static_cast<Index>(l.strides[k][d]);
  }
  return ix;
}

// A grid-stride loop over [0, n): the body runs once per element, whatever the grid.
#define SG_GRID_LOOP(i, n)                                                              \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * kThreads)

// The first element (row-major position in `layout`) of `index` outside [0, limit), and
// its value: found on the device, read back after synchronising `stream`, so that a
// kernel can refuse bad indices before writing anything. False when every index is in
// range. Defined in index.cu.
bool first_bad_index(const Stream& stream, const char* name, const cpu::Layout<1>& layout,
                     const int64_t* index, int64_t limit, int64_t* position, int64_t* value);
// The same for the range [low, limit) (negative indices that wrap around).
bool first_bad_index_in(const Stream& stream, const char* name, const cpu::Layout<1>& layout,
                        const int64_t* index, int64_t low, int64_t limit, int64_t* position,
                        int64_t* value);

// Blocks of kThreads for n elements, capped (grid-stride loops cover the rest).
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b < kMaxBlocks ? b : kMaxBlocks);
}

// What an element computes in (convert.h).
using cpu::ComputeIn;

// float32, float64 and the 16-bit dtypes: fn(S{}), S the storage type.
template <typename Fn>
void dispatch_computed(DType dt, Fn&& fn) {
  if (dt == DType::kFloat16) return fn(Half{});
  if (dt == DType::kBFloat16) return fn(BFloat16{});
  cpu::dispatch_floating(dt, fn);
}

// Sums of float32 accumulate in double, as on cpu.
template <typename T>
struct Acc {
  using type = T;
};
template <>
struct Acc<float> {
  using type = double;
};

// The block's sum of each thread's `v`, every thread getting it (all threads of the block
// call it; `part` is shared memory of kThreads). The tree's order is fixed by thread
// index, so a launch gives the same bits every time.
// `part` is the block's kThreads-element shared array (an A*, or the interpreted device's
// bounds-checked view of one).
template <typename A, typename Part>
__device__ A block_sum(A v, Part part) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const A r = part[0];
  __syncthreads();
  return r;
}

// Whether index arithmetic of `l` fits the 32-bit path: numel and every operand's largest
// offset below 2^30.
template <int N>
bool fits_32(const cpu::Layout<N>& l) {
  if (l.numel >= kMax32) return false;
  for (int k = 0; k < N; ++k) {
    int64_t last = 0;
    for (int d = 0; d < l.ndim; ++d) last += (l.sizes[d] - 1) * l.strides[k][d];
    if (last >= kMax32) return false;
  }
  return true;
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_CUDA_INDEXING_CUH_

// Internal to the per-level loops (loops.h): sixteen double accumulators ("lanes") held
// as four vectors of four, for the sums whose lane order loops.h fixes (element i of a
// block into lane i % 16, lanes folded pairwise 8 apart, then 4, 2, 1).
//
// Why vectors: written as an array of sixteen doubles, the accumulators of a short row
// (a layer norm's 256 values) lived in memory at the avx2 level, every addition a store
// and a reload (layer_norm forward 1.38x libtorch's time there; bench/RESULTS.md). GCC's
// generic vectors keep them in registers at every width (two xmm each at the baseline
// level, one ymm at avx2 and avx512) and add in exactly the scalar code's order, so the
// bits are those of the array form.
//
// Include only from a loops_<level> source; its names live in that level's namespace.
// Thread-safety: pure functions. Failure: none.
#ifndef STREAMGRAD_KERNELS_HOST_LANES_H_
#define STREAMGRAD_KERNELS_HOST_LANES_H_

#include <cstdint>

#include "runtime/base/host_device.h"

#ifndef SG_CPU_LEVEL
#error "include lanes.h from a loops_<level> source, which defines SG_CPU_LEVEL"
#endif

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace SG_CPU_LEVEL {
namespace lanes {

constexpr int kLanes = 16;

typedef double Double4 __attribute__((vector_size(32)));

// Four elements of T.
template <typename T>
struct Four {
  typedef T type __attribute__((vector_size(4 * sizeof(T))));
};

// Results through references: a 32-byte vector returned by value would change the ABI at
// the baseline level (GCC warns), even though every helper here is inlined.

// out = p[0..3] as doubles.
template <typename T>
SG_INLINE void load(Double4& out, const T* p) {
  typename Four<T>::type v;
  __builtin_memcpy(&v, p, sizeof v);
  out = __builtin_convertvector(v, Double4);
}

// out = (p[0..3] - mean) as doubles, the difference rounded to T first.
template <typename T>
SG_INLINE void load_centred(Double4& out, const T* p, T mean) {
  typename Four<T>::type v;
  __builtin_memcpy(&v, p, sizeof v);
  v -= mean;
  out = __builtin_convertvector(v, Double4);
}

// Four named vectors, not an array: GCC keeps an array of vectors that a loop indexes in
// memory, which is what this header is for avoiding.
struct Lanes {
  Double4 v0 = {}, v1 = {}, v2 = {}, v3 = {};

  // Lanes 0..15 += t[0..15].
  SG_INLINE void add(const Double4* t) {
    v0 += t[0];
    v1 += t[1];
    v2 += t[2];
    v3 += t[3];
  }

  // Into an array of kLanes, for the remainder of a block and the fold.
  SG_INLINE void store(double* out) const {
    __builtin_memcpy(out, &v0, sizeof v0);
    __builtin_memcpy(out + 4, &v1, sizeof v1);
    __builtin_memcpy(out + 8, &v2, sizeof v2);
    __builtin_memcpy(out + 12, &v3, sizeof v3);
  }
};

// Lanes j and j + w added, w = 8, 4, 2, 1: the sum of all sixteen.
SG_INLINE double fold(double* acc) {
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0];
}

}  // namespace lanes
}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_LANES_H_

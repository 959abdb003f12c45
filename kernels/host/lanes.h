// Internal to the per-level loops (loops.h): sixteen double accumulators ("lanes") held
// as two groups of eight, for the sums whose lane order loops.h fixes (element i of a
// block into lane i % 16, lanes folded pairwise 8 apart, then 4, 2, 1).
//
// Why vectors: written as an array of sixteen doubles, the accumulators of a short row
// (a layer norm's 256 values) lived in memory at the avx2 level, every addition a store
// and a reload (layer_norm forward 1.38x libtorch's time there; bench/RESULTS.md). GCC's
// generic vectors keep them in registers at every width and add in exactly the scalar
// code's order, so the bits are those of the array form. Eight lanes a vector at avx512,
// four elsewhere (Double8 below): at avx512 vectors of four left half of each instruction
// idle, and the float-to-double conversions, products and sums of a layer norm's
// statistics filled the two 256-bit ports (bench/RESULTS.md).
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

// Eight lanes: one zmm at avx512; elsewhere two vectors of four (a 64-byte generic vector
// there went through the stack and general registers, lane by lane: seen in the
// avx2 disassembly), which add in the same order, so every level gives the same bits.
#if defined(SG_CPU_LEVEL_AVX512) && defined(__AVX512F__)
#define SG_LANES_EIGHT_WIDE 1
typedef double Double8 __attribute__((vector_size(64)));
#else
typedef double Double4 __attribute__((vector_size(32)));
struct Double8 {
  Double4 lo, hi;  // lanes 0..3 and 4..7
};
#endif

// Results through references: a vector returned by value would change the ABI at the
// narrower levels (GCC warns), even though every helper here is inlined. Conversions are
// written element by element: GCC 12 lowers __builtin_convertvector from floats to
// doubles as halves and shuffles, but turns this form into one instruction per vector.

// out[k] = value(k) for k < 8, as doubles.
template <typename Value>
SG_INLINE void gather(Double8& out, Value value) {
#ifdef SG_LANES_EIGHT_WIDE
  out = Double8{static_cast<double>(value(0)), static_cast<double>(value(1)),
                static_cast<double>(value(2)), static_cast<double>(value(3)),
                static_cast<double>(value(4)), static_cast<double>(value(5)),
                static_cast<double>(value(6)), static_cast<double>(value(7))};
#else
  out.lo = Double4{static_cast<double>(value(0)), static_cast<double>(value(1)),
                   static_cast<double>(value(2)), static_cast<double>(value(3))};
  out.hi = Double4{static_cast<double>(value(4)), static_cast<double>(value(5)),
                   static_cast<double>(value(6)), static_cast<double>(value(7))};
#endif
}

// out = p[0..7] as doubles.
template <typename T>
SG_INLINE void load(Double8& out, const T* p) {
  gather(out, [p](int k) { return p[k]; });
}

// out = (p[0..7] - mean) as doubles, each difference rounded to T first.
template <typename T>
SG_INLINE void load_centred(Double8& out, const T* p, T mean) {
  gather(out, [p, mean](int k) { return p[k] - mean; });
}

// out = ((p[0..7] - mean) * rstd) as doubles, each normalised value rounded to T first.
template <typename T>
SG_INLINE void load_normalised(Double8& out, const T* p, T mean, T rstd) {
  gather(out, [p, mean, rstd](int k) { return (p[k] - mean) * rstd; });
}

// Two named vectors, not an array: GCC keeps an array of vectors that a loop indexes in
// memory, which is what this header is for avoiding.
struct Lanes {
  Double8 v0 = {}, v1 = {};

  // Lanes 0..7 += t0, lanes 8..15 += t1.
  SG_INLINE void add(const Double8& t0, const Double8& t1) {
#ifdef SG_LANES_EIGHT_WIDE
    v0 += t0;
    v1 += t1;
#else
    v0.lo += t0.lo;
    v0.hi += t0.hi;
    v1.lo += t1.lo;
    v1.hi += t1.hi;
#endif
  }

  // Lanes 0..7 += a0 * b0, lanes 8..15 += a1 * b1 (each product rounded, then added).
  SG_INLINE void add_products(const Double8& a0, const Double8& b0, const Double8& a1,
                              const Double8& b1) {
#ifdef SG_LANES_EIGHT_WIDE
    v0 += a0 * b0;
    v1 += a1 * b1;
#else
    v0.lo += a0.lo * b0.lo;
    v0.hi += a0.hi * b0.hi;
    v1.lo += a1.lo * b1.lo;
    v1.hi += a1.hi * b1.hi;
#endif
  }

  // Into an array of kLanes.
  SG_INLINE void store(double* out) const {
#ifdef SG_LANES_EIGHT_WIDE
    __builtin_memcpy(out, &v0, sizeof v0);
    __builtin_memcpy(out + 8, &v1, sizeof v1);
#else
    __builtin_memcpy(out, &v0.lo, sizeof v0.lo);
    __builtin_memcpy(out + 4, &v0.hi, sizeof v0.hi);
    __builtin_memcpy(out + 8, &v1.lo, sizeof v1.lo);
    __builtin_memcpy(out + 12, &v1.hi, sizeof v1.hi);
#endif
  }

  // The fold without leaving the registers: lanes 0..3 and 4..7 each take the lanes 8
  // apart, then 4 apart, then 2 and 1 (loops.h's order, each addition's operands in the
  // same order too). Through an array, the fold of a 256-value row was a third of
  // sum_block's time at the avx2 level: its loads and stores of mixed widths wait on one
  // another.
  SG_INLINE double sum() const {
#ifdef SG_LANES_EIGHT_WIDE
    const Double8 a = v0 + v1;
    const double b0 = a[0] + a[4], b1 = a[1] + a[5], b2 = a[2] + a[6], b3 = a[3] + a[7];
#else
    const Double4 b = (v0.lo + v1.lo) + (v0.hi + v1.hi);
    const double b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
#endif
    const double c0 = b0 + b2;
    const double c1 = b1 + b3;
    return c0 + c1;
  }
};

// The sum of l's lanes once the last `rest` (< kLanes) elements of a row, value(j) for the
// j-th of them, are added into lanes 0, 1, ...: the other lanes add +0, which changes none
// of them (a lane starts at +0 and, adding in round-to-nearest, never becomes -0; an
// infinite or NaN lane stays as it is), so the bits are those of adding the rest one by
// one, and the fold stays in registers. Folded through an array instead, one addition
// after another through memory, the remainder of a batch norm's 7 x 7 or 14 x 14 rows
// cost about as much as their whole blocks.
template <typename Value>
SG_INLINE double finish(const Lanes& lanes, int64_t rest, Value value) {
  Lanes l = lanes;  // a copy: taken by value, a Lanes would change the baseline level's ABI
  if (rest > 0) {
    double t[kLanes];
    for (int j = 0; j < kLanes; ++j) t[j] = j < rest ? value(j) : 0.0;
    Double8 t0, t1;
    gather(t0, [&t](int k) { return t[k]; });
    gather(t1, [&t](int k) { return t[8 + k]; });
    l.add(t0, t1);
  }
  return l.sum();
}

}  // namespace lanes
}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#undef SG_LANES_EIGHT_WIDE

#endif  // STREAMGRAD_KERNELS_HOST_LANES_H_

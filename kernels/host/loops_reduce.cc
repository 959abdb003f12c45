// The reduction loops of one instruction-set level (see loops.h): a block sum in 16
// double lanes (lanes.h), max/min in 16 lanes, and the row-of-accumulators step of a
// reduction over outer dims. Lane counts and folding orders are written out in the
// source, never left to the vector width, so every level produces the same bits.
#include "kernels/host/lanes.h"
#include "kernels/host/loops.h"

#ifndef SG_CPU_LEVEL
#error "compile this file through a loops_<level> target, which defines SG_CPU_LEVEL"
#endif

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace SG_CPU_LEVEL {
namespace {

using lanes::kLanes;

// Element i of the block goes to lane i % 16; lanes fold pairwise, 8 apart, then 4, 2, 1.
template <typename T>
double sum_lanes(const T* p, int64_t n) {
  lanes::Lanes l;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    lanes::Double8 t0, t1;
    lanes::load(t0, p + i);
    lanes::load(t1, p + i + 8);
    l.add(t0, t1);
  }
  return lanes::finish(l, n - i, [&](int j) { return static_cast<double>(p[i + j]); });
}

// Once a NaN is picked no comparison replaces it.
template <typename T, bool kMax>
SG_INLINE T pick(T acc, T v) {
  return (kMax ? v > acc : v < acc) || v != v ? v : acc;
}

template <typename T, bool kMax>
T extreme_lanes(const T* p, int64_t n, T acc) {
  if (n < kLanes) {
    for (int64_t i = 0; i < n; ++i) acc = pick<T, kMax>(acc, p[i]);
    return acc;
  }
  T lane[kLanes];
  for (int j = 0; j < kLanes; ++j) lane[j] = p[j];
  int64_t i = kLanes;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane[j] = pick<T, kMax>(lane[j], p[i + j]);
  }
  for (int j = 0; i + j < n; ++j) lane[j] = pick<T, kMax>(lane[j], p[i + j]);
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) lane[j] = pick<T, kMax>(lane[j], lane[j + w]);
  }
  return pick<T, kMax>(acc, lane[0]);
}

template <typename T>
void column_sum(double* __restrict acc, const T* __restrict row, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<double>(row[j]);
}

template <typename T, bool kMax>
void column_extreme(T* __restrict acc, const T* __restrict row, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] = pick<T, kMax>(acc[j], row[j]);
}

}  // namespace

double sum_block(DType dt, const void* p, int64_t n) {
  if (dt == DType::kFloat32) return sum_lanes(static_cast<const float*>(p), n);
  return sum_lanes(static_cast<const double*>(p), n);
}

void extreme(bool is_max, DType dt, const void* p, int64_t n, void* acc) {
  if (dt == DType::kFloat32) {
    float* a = static_cast<float*>(acc);
    const float* x = static_cast<const float*>(p);
    *a = is_max ? extreme_lanes<float, true>(x, n, *a) : extreme_lanes<float, false>(x, n, *a);
  } else {
    double* a = static_cast<double*>(acc);
    const double* x = static_cast<const double*>(p);
    *a = is_max ? extreme_lanes<double, true>(x, n, *a) : extreme_lanes<double, false>(x, n, *a);
  }
}

void columns(Reduce op, DType dt, void* acc, const void* row, int64_t n) {
  if (dt == DType::kFloat32) {
    const float* r = static_cast<const float*>(row);
    switch (op) {
      case Reduce::kSum: return column_sum(static_cast<double*>(acc), r, n);
      case Reduce::kMax: return column_extreme<float, true>(static_cast<float*>(acc), r, n);
      case Reduce::kMin: return column_extreme<float, false>(static_cast<float*>(acc), r, n);
    }
  } else {
    const double* r = static_cast<const double*>(row);
    switch (op) {
      case Reduce::kSum: return column_sum(static_cast<double*>(acc), r, n);
      case Reduce::kMax: return column_extreme<double, true>(static_cast<double*>(acc), r, n);
      case Reduce::kMin: return column_extreme<double, false>(static_cast<double*>(acc), r, n);
    }
  }
}

}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

// The order of sort and topk, and the category search of multinomial sampling, as
// SG_HOST_DEVICE code: the host loops (kernels/host/sort.cc) and the cuda kernels
// (kernels/cuda/sort.cu) order and draw with these same functions, so both give the same
// indices.
//
// SortOrder is a strict total order on (value, index) pairs: NaN counts as larger than
// every number (the reference's rule), and equal values (two NaNs included, and -0.0 and
// 0.0) keep their index order, so a sort is stable in both directions and its result
// does not depend on the algorithm that applies the order.
//
// Thread-safety: pure functions on values. Failure: none (callers check parameters).
#ifndef STREAMGRAD_KERNELS_FUNCTORS_SORT_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_SORT_OPS_H_

#include <stdint.h>

#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {

template <typename T>
struct SortOrder {
  bool descending;
  // Whether (a, ia) comes before (b, ib).
  SG_HOST_DEVICE SG_INLINE bool operator()(T a, int64_t ia, T b, int64_t ib) const {
    const bool a_nan = a != a, b_nan = b != b;
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return ia < ib;
      return descending ? a_nan : b_nan;
    }
    if (a == b) return ia < ib;
    return descending ? a > b : a < b;
  }
};

// The category a draw u in [0, 1) picks from n weights p[0], p[stride], ... whose sum,
// added left to right in double, is `total` (> 0): the first i whose running sum exceeds
// u * total, so a zero weight is never picked. Should rounding leave no running sum above
// the target, the last category of nonzero weight.
template <typename T>
SG_HOST_DEVICE SG_INLINE int64_t multinomial_pick(const T* p, int64_t stride, int64_t n,
                                                  double total, double u) {
  const double target = u * total;
  double run = 0;
  int64_t last = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = static_cast<double>(p[i * stride]);
    run += w;
    if (w > 0) last = i;
    if (run > target) return i;
  }
  return last;
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_SORT_OPS_H_

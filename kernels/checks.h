// Internal to the cpu kernels: the argument checks every kernel runs before it enqueues
// anything, and the view descriptions their messages use.
//
// Messages name the kernel (its launch name, e.g. "add", "index_select"), the argument,
// its dtype, sizes and strides, and what was expected.
// Thread-safety: pure functions. Failure: ValueError for bad views. (The device was
// decided before, by the dispatch table: kernels/dispatch/registry.h.)
#ifndef STREAMGRAD_KERNELS_CHECKS_H_
#define STREAMGRAD_KERNELS_CHECKS_H_

#include <string>

#include "kernels/view.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

// "float32 [2, 3]", with the strides appended when the view is not contiguous.
std::string describe(const View& v);

// The checks every floating kernel `out = f(a, b)` starts with: well-formed views, a
// writable out, one floating dtype for all three.
void check_floating_out_a_b(const char* kernel, const View& out, const View& a, const View& b);
// One stride per size, rank <= kMaxDims, sizes and strides >= 0, data when non-empty.
void check_view(const char* kernel, const char* what, const View& v);
// check_view, and no two elements share an address (a stride of 0 on a dim of size > 1
// would make the result depend on write order).
void check_output(const char* kernel, const char* what, const View& v);
void check_floating(const char* kernel, const char* what, const View& v);
void check_dtype(const char* kernel, const char* what, const View& v, DType want);
void check_same_dtype(const char* kernel, const char* what_a, const View& a,
                      const char* what_b, const View& b);
void check_same_sizes(const char* kernel, const char* what_a, const View& a,
                      const char* what_b, const View& b);
// `out` may be exactly `in` (same address, dtype and strides); overlap that the check can
// prove otherwise (same start with other strides, or two contiguous views whose bytes
// intersect) is a ValueError. Interleaved strided views pass unchecked.
void check_no_partial_overlap(const char* kernel, const char* what_out, const View& out,
                              const char* what_in, const View& in);
// The byte ranges of the two views do not intersect at all.
void check_disjoint(const char* kernel, const char* what_out, const View& out,
                    const char* what_in, const View& in);
// check_view, and a contiguous view of the given rank.
void check_contiguous(const char* kernel, const char* what, const View& v, int64_t rank);
// A dim index in [0, rank).
void check_dim(const char* kernel, int64_t dim, const View& v);

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_CHECKS_H_

// cumsum along a dim, as the reference's: element i is the sum of elements 0..i.
//
// Composed of ops as a Hillis-Steele scan: ceil(log2 n) passes, each adding the tensor to
// itself shifted by 1, 2, 4, ... along dim (narrow, add, cat), so O(n log n) work in
// 2 log2 n kernel launches rather than a dedicated single-pass kernel. Its gradient, the
// reverse cumulative sum of the incoming gradient, comes from autograd through those
// ops, and so is differentiable again. The partial sums are pairwise rather than
// sequential, which rounds no worse than a left-to-right loop.
#include <algorithm>

#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {

Tensor cumsum(const Tensor& x, int64_t dim) {
  using namespace ops_internal;  // NOLINT: the helpers every op uses
  check_defined(x, "cumsum", "the input");
  check_floating(x, "cumsum");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "cumsum");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  if (n <= 1) return clone(x);
  Tensor y = x;
  for (int64_t shift = 1; shift < n; shift *= 2) {
    const Tensor moved = add(narrow(y, d, shift, n - shift), narrow(y, d, 0, n - shift));
    y = cat({narrow(y, d, 0, shift), moved}, d);
  }
  return y;
}

}  // namespace streamgrad

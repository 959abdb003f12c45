// cumsum along a dim, as the reference's: element i is the sum of elements 0..i.
//
// One launch of the dedicated scan kernel (kernels::cumsum): each line along dim summed
// left to right in double, so float32 results are the correctly rounded running sums and
// the bits do not depend on the thread count. Its gradient, the reverse running sum of the
// incoming gradient, is the same kernel run from each line's end; the two are each
// other's backward, so cumsum is differentiable to any order.
#include <algorithm>
#include <memory>

#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

Tensor running_sum(const Tensor& x, int64_t d, bool reverse);

// The gradient of a running sum is the running sum the other way.
struct CumsumBackward final : Node {
  std::string name() const override { return "CumsumBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {running_sum(grads[0], dim, !reverse)};
  }
  int64_t dim = 0;
  bool reverse = false;
};

// x of rank >= 1 (a 0-dim x is handled by the caller), d normalised.
Tensor running_sum(const Tensor& x, int64_t d, bool reverse) {
  Tensor out = new_output(x.sizes(), x.dtype(), x.device());
  kernels::cumsum(stream_of(out), out.view(), x.view(), d, reverse);
  if (any_requires_grad({x})) {
    auto node = std::make_shared<CumsumBackward>();
    node->dim = d;
    node->reverse = reverse;
    wire(node, {x}, {out});
  }
  return out;
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) {
  check_defined(x, "cumsum", "the input");
  check_floating(x, "cumsum");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "cumsum");
  // A 0-dim tensor is its own running sum: a copy, with clone's gradient.
  if (x.dim() == 0) return clone(x);
  return running_sum(x, d, /*reverse=*/false);
}

}  // namespace streamgrad

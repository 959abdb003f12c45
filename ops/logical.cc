// all and any, as the reference's: whether every / some element is nonzero (NaN counts as
// nonzero), over all elements (0-dim result) or along one dim. Any dtype; the result is
// bool and has no history. An empty reduction gives true for all and false for any.
//
// Composed of ops: the nonzero elements are counted in float64 (exact below 2^53
// elements) and the count compared with the number of elements.
#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

Tensor count_nonzero_over(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return sum(to(ne(x, 0.0), DType::kFloat64), dims, keepdim);
}

int64_t reduced_count(const Tensor& x, int64_t dim, const char* op) {
  const int64_t d = wrap_dim(dim, x.dim(), op);
  return x.dim() == 0 ? 1 : x.size(d);
}

}  // namespace

Tensor all(const Tensor& x) {
  check_defined(x, "all", "the input");
  NoGradGuard no_grad;
  return eq(count_nonzero_over(x, {}, false), static_cast<double>(x.numel()));
}

Tensor any(const Tensor& x) {
  check_defined(x, "any", "the input");
  NoGradGuard no_grad;
  return gt(count_nonzero_over(x, {}, false), 0.0);
}

Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined(x, "all", "the input");
  const int64_t n = reduced_count(x, dim, "all");
  NoGradGuard no_grad;
  return eq(count_nonzero_over(x, {dim}, keepdim), static_cast<double>(n));
}

Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined(x, "any", "the input");
  reduced_count(x, dim, "any");
  NoGradGuard no_grad;
  return gt(count_nonzero_over(x, {dim}, keepdim), 0.0);
}

}  // namespace streamgrad

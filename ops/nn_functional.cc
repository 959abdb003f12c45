// softmax / log_softmax, dropout, flatten, argmax and embedding, composed of
// differentiable ops (so each is differentiable to any order). linear is in matmul.cc.
//
// log_softmax shifts by the row maximum, taken without history (the shift cancels in
// the result, so it needs no gradient), so large inputs neither overflow nor lose the
// small terms.
#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

Tensor row_max(const Tensor& input, int64_t dim) {
  NoGradGuard no_grad;
  return max(input, dim, /*keepdim=*/true).first;
}

}  // namespace

Tensor log_softmax(const Tensor& input, int64_t dim) {
  SG_AUTOCAST(kFloat32, log_softmax, input, dim);
  check_defined(input, "log_softmax", "the input");
  check_floating(input, "log_softmax");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(input.dim(), 1), "log_softmax");
  if (input.dim() == 0) return sub(input, input);  // one class: log 1
  const Tensor z = sub(input, row_max(input, d));
  return sub(z, log(sum(exp(z), {d}, /*keepdim=*/true)));
}

Tensor softmax(const Tensor& input, int64_t dim) {
  SG_AUTOCAST(kFloat32, softmax, input, dim);
  check_defined(input, "softmax", "the input");
  check_floating(input, "softmax");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(input.dim(), 1), "softmax");
  if (input.dim() == 0) return add(sub(input, input), 1.0);
  const Tensor e = exp(sub(input, row_max(input, d)));
  return div(e, sum(e, {d}, /*keepdim=*/true));
}

Tensor dropout(const Tensor& input, double p, bool training) {
  check_defined(input, "dropout", "the input");
  check_floating(input, "dropout");
  SG_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability ", p, " must be in [0, 1]");
  if (!training || p == 0) return input;
  if (p == 1) return mul(input, 0.0);
  Tensor keep = rand(input.sizes(), TensorOptions().dtype(input.dtype()).device(input.device()));
  const Stream s = stream_of(keep);
  // Kept where u >= p (probability 1 - p), scaled so the expectation is unchanged.
  kernels::unary_scalar(s, kernels::UnaryScalar::kGe, keep.view(), keep.view(), p);
  kernels::unary_scalar(s, kernels::UnaryScalar::kMul, keep.view(), keep.view(), 1 / (1 - p));
  return mul(input, keep);
}

Tensor flatten(const Tensor& input, int64_t start_dim, int64_t end_dim) {
  check_defined(input, "flatten", "the input");
  if (input.dim() == 0) return reshape(input, {1});
  const int64_t s = wrap_dim(start_dim, input.dim(), "flatten");
  const int64_t e = wrap_dim(end_dim, input.dim(), "flatten");
  SG_CHECK(s <= e, ValueError, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim,
           " for ", input.describe());
  Shape shape(input.sizes().begin(), input.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= input.size(d);
  shape.push_back(n);
  shape.insert(shape.end(), input.sizes().begin() + e + 1, input.sizes().end());
  return reshape(input, shape);
}

Tensor argmax(const Tensor& input, int64_t dim, bool keepdim) {
  // max's checks, under argmax's name.
  check_defined(input, "argmax", "the input");
  check_floating(input, "argmax");
  const int64_t d = wrap_dim(dim, input.dim(), "argmax");
  SG_CHECK(input.dim() == 0 || input.size(d) > 0, ValueError, "argmax: cannot take the arg-max "
           "of ", input.describe(), " along dimension ", dim, ", which is empty");
  NoGradGuard no_grad;
  return max(input, dim, keepdim).second;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  check_defined(weight, "embedding", "the weight");
  check_defined(indices, "embedding", "indices");
  SG_CHECK(weight.dim() == 2, ValueError, "embedding: expected a [num_embeddings, dim] weight, got ",
           weight.describe());
  SG_CHECK(indices.dtype() == DType::kInt64, ValueError, "embedding: indices must be int64, got ",
           indices.describe(), "; convert them with to(indices, DType::kInt64)");
  check_same_device(weight, indices, "embedding");
  SG_CHECK(padding_idx < weight.size(0), ValueError, "embedding: padding_idx ", padding_idx,
           " is not a row of ", weight.describe());
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  const Tensor flat = reshape(indices, {-1});
  // On the device, before index_select: a bad index is reported under embedding's name
  // (on sim at the next synchronisation).
  kernels::check_index_range(
      stream_of(flat), flat.view(), weight.size(0),
      absl::StrCat("embedding: indices ", indices.describe(), " must be rows 0..",
                   weight.size(0) - 1, " of weight ", weight.describe(), "; remap or clamp "
                   "the indices, or make the table larger"));
  Tensor rows = index_select(weight, 0, flat);
  if (padding_idx >= 0 && weight.requires_grad()) {
    // rows.detach() + keep * (rows - rows.detach()): the same values, but the gradient
    // reaches the weight only where the index is not padding_idx.
    Tensor keep;
    {
      NoGradGuard no_grad;
      const Tensor as_float = to(reshape(indices, {-1, 1}), weight.dtype());
      keep = abs(sub(as_float, static_cast<double>(padding_idx)));
      kernels::unary_scalar(stream_of(keep), kernels::UnaryScalar::kGe, keep.view(), keep.view(), 0.5);
    }
    const Tensor fixed = rows.detach();
    rows = add(fixed, mul(keep, sub(rows, fixed)));
  }
  return reshape(rows, out_shape);
}

}  // namespace streamgrad

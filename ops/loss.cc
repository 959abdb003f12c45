// nll_loss, cross_entropy and mse_loss, composed of differentiable ops.
//
// Targets stay on the device: the ignore_index mask is computed there (targets compared
// through a floating copy, exact for class indices below 2^24), so a loss never waits for
// the host. Ignored targets are replaced by class 0 before gather and masked out after.
#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// Per-sample 1 (kept) / 0 (ignored) as a floating [N] tensor, and the targets with
// ignored entries replaced by 0, as int64 [N, 1] for gather.
struct Targets {
  Tensor keep;
  Tensor safe;
};

Targets split_targets(const Tensor& target, int64_t ignore_index, DType dtype) {
  NoGradGuard no_grad;
  const Tensor as_float = to(target, DType::kFloat64);
  Tensor keep = abs(sub(as_float, static_cast<double>(ignore_index)));
  kernels::unary_scalar(stream_of(keep), kernels::UnaryScalar::kGe, keep.view(), keep.view(), 0.5);
  const Tensor safe = to(mul(as_float, keep), DType::kInt64);
  return {to(keep, dtype), reshape(safe, {-1, 1})};
}

void check_classification(const char* op, const Tensor& input, const Tensor& target) {
  check_defined(input, op, "the input");
  check_defined(target, op, "the target");
  check_floating(input, op);
  check_same_device(input, target, op);
  SG_CHECK(target.dtype() == DType::kInt64, ValueError, op,
           ": target must hold int64 class indices, got ", target.describe());
  SG_CHECK(input.dim() == 2 && target.dim() == 1 && target.size(0) == input.size(0), ValueError,
           op, ": expected input [N, C] and target [N], got ", input.describe(), " and ",
           target.describe());
}

Tensor reduce(const Tensor& per_sample, const Tensor& keep, Reduction r) {
  switch (r) {
    case Reduction::kNone:
      return per_sample;
    case Reduction::kSum:
      return sum(per_sample);
    case Reduction::kMean:
      // Over the targets not ignored (all ignored: 0 / 0 = NaN, as PyTorch).
      return div(sum(per_sample), sum(keep));
  }
  return per_sample;
}

Tensor picked(const Tensor& log_probs, const Targets& t) {
  return mul(reshape(gather(log_probs, 1, t.safe), {-1}), t.keep);
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options) {
  SG_AUTOCAST(kFloat32, nll_loss, log_probs, target, options);
  check_classification("nll_loss", log_probs, target);
  const Targets t = split_targets(target, options.ignore_index, log_probs.dtype());
  return reduce(neg(picked(log_probs, t)), t.keep, options.reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  SG_AUTOCAST(kFloat32, cross_entropy, input, target, options);
  check_classification("cross_entropy", input, target);
  const double eps = options.label_smoothing;
  SG_CHECK(eps >= 0 && eps <= 1, ValueError, "cross_entropy: label_smoothing ", eps,
           " must be in [0, 1]");
  const Tensor logp = log_softmax(input, 1);
  const Targets t = split_targets(target, options.ignore_index, input.dtype());
  Tensor loss = neg(picked(logp, t));
  if (eps > 0) {
    // The smoothed target puts eps / C on every class: its part is -mean(log p) per row.
    const Tensor uniform = mul(neg(mean(logp, {1})), t.keep);
    loss = add(mul(loss, 1 - eps), mul(uniform, eps));
  }
  return reduce(loss, t.keep, options.reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  SG_AUTOCAST(kFloat32, mse_loss, input, target, reduction);
  check_defined(input, "mse_loss", "the input");
  check_defined(target, "mse_loss", "the target");
  SG_CHECK(input.sizes() == target.sizes(), ValueError, "mse_loss: input ", input.describe(),
           " and target ", target.describe(), " must have the same shape");
  const Tensor d = sub(input, target);
  const Tensor sq = mul(d, d);
  switch (reduction) {
    case Reduction::kNone:
      return sq;
    case Reduction::kSum:
      return sum(sq);
    case Reduction::kMean:
      return mean(sq);
  }
  return sq;
}

}  // namespace streamgrad

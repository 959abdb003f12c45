// nll_loss, cross_entropy and mse_loss, composed of differentiable ops.
//
// Each validates its own arguments first, so that a bad call is reported under the loss
// the user called, not under gather or sub inside it. Targets stay on the device: the
// ignore_index mask and the range check of the class indices run there
// (kernels::check_index_range: on sim its error surfaces at the next synchronisation), so
// a loss never waits for the host. Ignored targets are replaced by class 0 before gather
// and masked out after.
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grad_mode.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "runtime/base/warning.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

std::string shape_str(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

// Per-sample 1 (kept) / 0 (ignored) as a floating [N] tensor, and the targets with
// ignored entries replaced by 0, as int64 [N, 1] for gather.
struct Targets {
  Tensor keep;
  Tensor safe;
};

Targets split_targets(const Tensor& target, int64_t ignore_index, DType dtype) {
  NoGradGuard no_grad;
  // int64 compares exactly with an integral scalar (kernels::compare_scalar).
  const Tensor kept = ne(target, static_cast<double>(ignore_index));
  const Tensor zero = zeros({}, TensorOptions().dtype(DType::kInt64).device(target.device()));
  return {to(kept, dtype), reshape(where(kept, target, zero), {-1, 1})};
}

// A classification loss's arguments, batched: input [N, C] and target [N]. An unbatched
// call (input [C], 0-dim target, as the reference accepts) is seen as a batch of one.
struct Classification {
  Tensor input, target;
  bool unbatched = false;
};

Classification check_classification(const char* op, const Tensor& input, const Tensor& target) {
  check_defined(input, op, "the input");
  check_defined(target, op, "the target");
  check_floating(input, op);
  SG_CHECK(target.dtype() == DType::kInt64, ValueError, op,
           ": target must hold int64 class indices, got ", target.describe(),
           "; convert it with to(target, DType::kInt64)");
  check_same_device(input, target, op);
  const bool batched = input.dim() == 2 && target.dim() == 1 && target.size(0) == input.size(0);
  const bool unbatched = input.dim() == 1 && target.dim() == 0;
  SG_CHECK(batched || unbatched, ValueError, op,
           ": expected input [N, C] and target [N], or an unbatched input [C] and a 0-dim "
           "target, got input ", input.describe(), " and target ", target.describe());
  SG_CHECK(input.size(-1) > 0, ValueError, op, ": input ", input.describe(),
           " has no classes (its last dim is empty)");
  if (batched) return {input, target, false};
  return {reshape(input, {1, input.size(0)}), reshape(target, {1}), true};
}

// Checks on the device that the kept targets are classes of `input` (see the header);
// the message shows the arguments as the caller passed them.
void check_classes(const char* op, const Tensor& input, const Tensor& target, const Targets& t,
                   int64_t ignore_index) {
  const int64_t classes = input.size(-1);
  kernels::check_index_range(
      stream_of(t.safe), t.safe.view(), classes,
      absl::StrCat(op, ": target ", target.describe(), " must hold class indices 0..",
                   classes - 1, " of input ", shape_str(input.sizes()), " or ignore_index ",
                   ignore_index, "; fix the labels, or set ignore_index to the value that marks "
                   "samples without a label"));
}

Tensor reduce(const Tensor& per_sample, const Tensor& keep, Reduction r) {
  switch (r) {
    case Reduction::kNone:
      return per_sample;
    case Reduction::kSum:
      return sum(per_sample);
    case Reduction::kMean: {
      // Over the targets not ignored. All ignored: the reference's forward is 0 / 0 (NaN)
      // but its backward writes nothing, a zero gradient. So the sum is divided by
      // max(count, 1) and the NaN is selected by where(), whose gradient in the branch not
      // taken is zero: 0 / 0 inside the graph would make the gradient NaN as well.
      Tensor any_kept, count, nan;
      {
        NoGradGuard no_grad;
        count = sum(keep);
        any_kept = gt(count, 0.0);
        const TensorOptions o = TensorOptions().dtype(count.dtype()).device(count.device());
        count = where(any_kept, count, ones({}, o));
        nan = full({}, std::numeric_limits<double>::quiet_NaN(), o);
      }
      return where(any_kept, div(sum(per_sample), count), nan);
    }
  }
  return per_sample;
}

// The loss of each sample (the kNone result) back in the caller's form.
Tensor unbatch(const Tensor& loss, const Classification& c, Reduction r) {
  return c.unbatched && r == Reduction::kNone ? reshape(loss, {}) : loss;
}

Tensor picked(const Tensor& log_probs, const Targets& t) {
  return mul(reshape(gather(log_probs, 1, t.safe), {-1}), t.keep);
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options) {
  SG_AUTOCAST(kFloat32, nll_loss, log_probs, target, options);
  const Classification c = check_classification("nll_loss", log_probs, target);
  const Targets t = split_targets(c.target, options.ignore_index, c.input.dtype());
  check_classes("nll_loss", log_probs, target, t, options.ignore_index);
  return unbatch(reduce(neg(picked(c.input, t)), t.keep, options.reduction), c,
                 options.reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  SG_AUTOCAST(kFloat32, cross_entropy, input, target, options);
  const Classification c = check_classification("cross_entropy", input, target);
  const double eps = options.label_smoothing;
  SG_CHECK(eps >= 0 && eps <= 1, ValueError, "cross_entropy: label_smoothing ", eps,
           " must be in [0, 1]");
  const Targets t = split_targets(c.target, options.ignore_index, c.input.dtype());
  check_classes("cross_entropy", input, target, t, options.ignore_index);
  const Tensor logp = log_softmax(c.input, 1);
  Tensor loss = neg(picked(logp, t));
  if (eps > 0) {
    // The smoothed target puts eps / C on every class: its part is -mean(log p) per row.
    const Tensor uniform = mul(neg(mean(logp, {1})), t.keep);
    loss = add(mul(loss, 1 - eps), mul(uniform, eps));
  }
  return unbatch(reduce(loss, t.keep, options.reduction), c, options.reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  SG_AUTOCAST(kFloat32, mse_loss, input, target, reduction);
  const char* op = "mse_loss";
  check_defined(input, op, "the input");
  check_defined(target, op, "the target");
  check_binary_devices(input, target, op);
  check_floating(input, op);
  check_floating(target, op);
  if (input.sizes() != target.sizes()) {
    const Shape shape = broadcast_shapes(input.sizes(), target.sizes(), op);
    // As the reference: legal, broadcast, but almost always a mistake (a [N] target
    // against a [N, 1] input compares every input with every target).
    SG_WARN("mse_loss: target ", shape_str(target.sizes()), " and input ",
            shape_str(input.sizes()), " differ in shape and are broadcast to ", shape_str(shape),
            ", which compares elements that probably do not belong together; give them the "
            "same shape (reshape or squeeze one)");
  }
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

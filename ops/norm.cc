// batch_norm, composed of differentiable ops (so it is differentiable to any order).
//
// Training normalises with the batch's mean and biased variance and moves the running
// statistics (when given) toward the batch's mean and unbiased variance, in place and
// without history, on the current stream; eval normalises with the running statistics.
#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// A per-channel tensor [C] in a shape that broadcasts against [N, C, *].
Tensor per_channel(const Tensor& t, int64_t rank) {
  Shape s(rank, 1);
  s[1] = t.size(0);
  return reshape(t, s);
}

void check_channel_tensor(const Tensor& t, const Tensor& input, const char* what) {
  if (!t.defined()) return;
  check_same_device(input, t, "batch_norm");
  check_same_dtype(input, t, "batch_norm");
  SG_CHECK(t.sizes() == Shape{input.size(1)}, ValueError, "batch_norm: ", what, " ",
           t.describe(), " must be [", input.size(1), "], one per channel of ", input.describe());
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps) {
  check_defined(input, "batch_norm", "the input");
  check_floating(input, "batch_norm");
  SG_CHECK(input.dim() >= 2, ValueError, "batch_norm: expected a [N, C] or [N, C, *] input, got ",
           input.describe());
  check_channel_tensor(weight, input, "weight");
  check_channel_tensor(bias, input, "bias");
  check_channel_tensor(running_mean, input, "running_mean");
  check_channel_tensor(running_var, input, "running_var");
  SG_CHECK(running_mean.defined() == running_var.defined(), ValueError,
           "batch_norm: running_mean and running_var must be given together");
  SG_CHECK(training || running_mean.defined(), ValueError,
           "batch_norm: eval mode needs running_mean and running_var");
  SG_CHECK(eps >= 0 && momentum >= 0 && momentum <= 1, ValueError, "batch_norm: eps ", eps,
           " must be >= 0 and momentum ", momentum, " in [0, 1]");
  const int64_t rank = input.dim();
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  const int64_t count = input.numel() / input.size(1);
  Tensor centered, var;
  if (training) {
    SG_CHECK(count > 1, ValueError, "batch_norm: training needs more than one value per channel, ",
             "got input ", input.describe());
    const Tensor batch_mean = mean(input, dims, /*keepdim=*/true);
    centered = sub(input, batch_mean);
    var = mean(mul(centered, centered), dims, /*keepdim=*/true);
    if (running_mean.defined()) {
      NoGradGuard no_grad;
      Tensor rm = running_mean, rv = running_var;
      mul_(rm, 1 - momentum);
      add_(rm, reshape(batch_mean, {input.size(1)}), momentum);
      mul_(rv, 1 - momentum);
      add_(rv, reshape(var, {input.size(1)}), momentum * count / (count - 1.0));
    }
  } else {
    centered = sub(input, per_channel(running_mean, rank));
    var = per_channel(running_var, rank);
  }
  Tensor out = div(centered, sqrt(add(var, eps)));
  if (weight.defined()) out = mul(out, per_channel(weight, rank));
  if (bias.defined()) out = add(out, per_channel(bias, rank));
  return out;
}

}  // namespace streamgrad

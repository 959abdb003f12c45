// group_norm, as the reference framework's torch.nn.functional.group_norm: the channels
// of an [N, C, *] input split into num_groups consecutive groups, each (sample, group)
// normalised by its own mean and biased variance, then a per-channel weight and bias.
//
// A composite, exact by construction: one (sample, group) is one row of layer_norm over
// [N, G, C / G * S], so the statistics and the normalisation are the fused layer_norm
// kernels each way (differentiable to any order, ops/layer_norm.cc), and the affine part
// is a per-channel mul and add. A group's elements are contiguous in a contiguous input,
// so the reshape is a view; layer_norm's own weight cannot carry the affine part (it is
// per element of a row, while a group's row spans several channels of S elements each).
// A float16 / bfloat16 input is normalised and scaled in float32 and rounded once, as the
// reference computes in its accumulate type.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// A weight or bias: [C] on the input's device, the input's dtype or float32 beside a
// 16-bit input (the reference's mixed precision).
void check_channel_param(const Tensor& p, const char* what, const Tensor& input) {
  if (!p.defined()) return;
  check_same_device(input, p, "group_norm");
  SG_CHECK(p.sizes() == Shape{input.size(1)}, ValueError, "group_norm: ", what, " ",
           p.describe(), " must be a vector of one value per channel, [", input.size(1),
           "], for input ", input.describe());
  const bool mixed = is_reduced_floating(input.dtype()) && p.dtype() == DType::kFloat32;
  SG_CHECK(p.dtype() == input.dtype() || mixed, ValueError, "group_norm: ", what, " ",
           p.describe(), " must be ", dtype_name(input.dtype()), " like input ",
           input.describe(), " (a float16 or bfloat16 input also takes float32 parameters); "
           "convert it with to()");
}

// A per-channel [C] tensor shaped to broadcast against [N, C, *] of rank `rank`.
Tensor per_channel(const Tensor& t, int64_t rank) {
  Shape s(rank, 1);
  s[1] = t.size(0);
  return reshape(t, s);
}

}  // namespace

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight,
                  const Tensor& bias, double eps) {
  SG_AUTOCAST(kFloat32, group_norm, input, num_groups, weight, bias, eps);
  check_defined(input, "group_norm", "the input");
  check_floating(input, "group_norm");
  SG_CHECK(input.dim() >= 2, ValueError, "group_norm: expected an [N, C] or [N, C, *] input "
           "(at least 2 dims), got ", input.describe(), "; add a batch dim with unsqueeze(x, 0)");
  const int64_t channels = input.size(1);
  SG_CHECK(num_groups > 0, ValueError, "group_norm: num_groups must be positive, got ",
           num_groups);
  SG_CHECK(channels % num_groups == 0, ValueError, "group_norm: the number of channels ",
           channels, " of input ", input.describe(), " must be divisible by num_groups ",
           num_groups, "; pick num_groups among the divisors of ", channels);
  check_channel_param(weight, "weight", input);
  check_channel_param(bias, "bias", input);
  SG_CHECK(!weight.defined() || !bias.defined() || weight.dtype() == bias.dtype(), ValueError,
           "group_norm: weight ", weight.describe(), " and bias ", bias.describe(),
           " must share one dtype");
  const int64_t rank = input.dim();
  int64_t group_size = channels / num_groups;
  for (int64_t d = 2; d < rank; ++d) group_size *= input.size(d);
  const bool widen = is_reduced_floating(input.dtype());
  const Tensor x = widen ? to(input, DType::kFloat32) : input;
  Tensor y = layer_norm(reshape(x, {input.size(0), num_groups, group_size}), {group_size},
                        Tensor(), Tensor(), eps);
  y = reshape(y, input.sizes());
  if (weight.defined()) y = mul(y, per_channel(weight, rank));
  if (bias.defined()) y = add(y, per_channel(bias, rank));
  return y.dtype() == input.dtype() ? y : to(y, input.dtype());
}

}  // namespace streamgrad

#include "nn/clip_grad.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace utils {
namespace {

// The p-norm of all of t's elements, a 0-dim tensor on t's device.
Tensor norm_of(const Tensor& t, double p) {
  if (t.numel() == 0) return zeros({}, TensorOptions().dtype(t.dtype()).device(t.device()));
  if (std::isinf(p)) return max(flatten(abs(t)), 0).first;
  if (p == 2) return sqrt(sum(mul(t, t)));
  if (p == 1) return sum(abs(t));
  return pow(sum(pow(abs(t), p)), 1 / p);
}

std::vector<Tensor> grads_of(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  SG_CHECK(norm_type > 0, ValueError, "clip_grad_norm_: norm_type must be positive or "
           "infinity, got ", norm_type);
  const std::vector<Tensor> grads = grads_of(parameters);
  if (grads.empty()) return 0;
  NoGradGuard no_grad;
  const Device first = grads[0].device();
  std::vector<Tensor> norms;
  norms.reserve(grads.size());
  for (const Tensor& g : grads) norms.push_back(to(norm_of(g, norm_type), first));
  const Tensor total = norm_of(stack(norms), norm_type);
  if (error_if_nonfinite) {
    const double v = total.item<double>();
    SG_CHECK(std::isfinite(v), Error, "clip_grad_norm_: the total norm of order ", norm_type,
             " of the gradients is ", v, " (non-finite), so they cannot be clipped; pass "
             "error_if_nonfinite=false to scale them by the non-finite norm anyway");
  }
  // Always multiplied, by at most 1: no host decision, so no wait for the norm here.
  const Tensor coef = clamp_max(div(max_norm, add(total, 1e-6)), 1.0);
  for (Tensor g : grads) {
    mul_(g, g.device() == first ? to(coef, g.dtype()) : to(to(coef, g.device()), g.dtype()));
  }
  return total.item<double>();
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  SG_CHECK(clip_value >= 0, ValueError, "clip_grad_value_: clip_value must not be negative, "
           "got ", clip_value);
  NoGradGuard no_grad;
  for (Tensor g : grads_of(parameters)) copy_(g, clamp(g, -clip_value, clip_value));
}

}  // namespace utils
}  // namespace nn
}  // namespace streamgrad

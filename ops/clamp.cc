// clamp, clamp_min and clamp_max, as the reference's: bounds are numbers in the tensor's
// dtype (rounded to it first), NaN stays NaN, and with min > max every element is max.
// The gradient passes where min <= x <= max (both inclusive, as the reference's), zero
// elsewhere and at NaN; it is a where() of ops, so differentiable again.
#include <optional>

#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

struct ClampBackward final : Node {
  ClampBackward(const Tensor& x, std::optional<double> lo, std::optional<double> hi)
      : input(x), min(lo), max(hi) {}
  std::string name() const override { return "ClampBackward"; }
  TensorList apply(TensorList&& grads) override {
    Tensor g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor x = input.unpack("ClampBackward");
    const Tensor zero = zeros_like(g);
    if (max) g = where(le(x, *max), g, zero);
    if (min) g = where(ge(x, *min), g, zero);
    return {g};
  }
  void release_variables() override { input.reset(); }
  SavedTensor input;
  std::optional<double> min, max;
};

}  // namespace

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
  SG_CHECK(min.has_value() || max.has_value(), ValueError,
           "clamp: at least one of min and max must be given");
  check_defined(a, "clamp", "the input");
  check_floating(a, "clamp");
  Tensor out = new_output(a.sizes(), a.dtype(), a.device());
  const Stream s = stream_of(out);
  kernels::View from = a.view();
  if (min) {
    kernels::unary_scalar(s, kernels::UnaryScalar::kClampMin, out.view(), from, *min);
    from = out.view();
  }
  if (max) kernels::unary_scalar(s, kernels::UnaryScalar::kClampMax, out.view(), from, *max);
  if (any_requires_grad({a})) wire(std::make_shared<ClampBackward>(a, min, max), {a}, {out});
  return out;
}

Tensor clamp_min(const Tensor& a, double min) { return clamp(a, min, std::nullopt); }
Tensor clamp_max(const Tensor& a, double max) { return clamp(a, std::nullopt, max); }

}  // namespace streamgrad

// The activations of today's models, silu and gelu (exact, through erf, and the tanh
// approximation), each one fused kernel forward and, with grad mode off, one backward.
//
// Under create_graph the backward is written with ops instead, so that it is
// differentiable again (the reference's silu_backward and gelu_backward are too); both
// forms save the input, as the reference does.
#include <string>

#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kKappa = 0.044715;

struct SiluBackward final : Node {
  explicit SiluBackward(const Tensor& x) : input(x) {}
  std::string name() const override { return "SiluBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor x = input.unpack("SiluBackward");
    if (!grad_mode_enabled()) return {binary_kernel(kernels::Binary::kSiluBackward, g, x)};
    const Tensor s = sigmoid(x);  // g s (1 + x (1 - s))
    return {mul(g, mul(s, add(mul(x, sub(1.0, s)), 1.0)))};
  }
  void release_variables() override { input.reset(); }
  SavedTensor input;
};

struct GeluBackward final : Node {
  GeluBackward(const Tensor& x, bool tanh_form) : input(x), tanh(tanh_form) {}
  std::string name() const override { return "GeluBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor x = input.unpack("GeluBackward");
    if (!grad_mode_enabled()) {
      return {binary_kernel(
          tanh ? kernels::Binary::kGeluTanhBackward : kernels::Binary::kGeluBackward, g, x)};
    }
    if (!tanh) {  // g (Phi(x) + x phi(x))
      const Tensor cdf = mul(add(erf(mul(x, kSqrtHalf)), 1.0), 0.5);
      const Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), kInvSqrt2Pi);
      return {mul(g, add(cdf, mul(x, pdf)))};
    }
    // t = tanh(u), u = sqrt(2/pi) (x + k x^3): g ((1 + t) / 2 + x / 2 (1 - t^2) du/dx).
    const Tensor x2 = mul(x, x);
    const Tensor t = streamgrad::tanh(mul(add(x, mul(mul(x2, x), kKappa)), kSqrt2OverPi));
    const Tensor du = mul(add(mul(x2, 3 * kKappa), 1.0), kSqrt2OverPi);
    const Tensor left = mul(add(t, 1.0), 0.5);
    const Tensor right = mul(mul(mul(x, 0.5), sub(1.0, mul(t, t))), du);
    return {mul(g, add(left, right))};
  }
  void release_variables() override { input.reset(); }
  SavedTensor input;
  bool tanh;
};

}  // namespace

Tensor silu(const Tensor& a) {
  Tensor out = unary_forward(kernels::Unary::kSilu, a, "silu");
  if (any_requires_grad({a})) wire(std::make_shared<SiluBackward>(a), {a}, {out});
  return out;
}

Tensor gelu(const Tensor& a, const std::string& approximate) {
  SG_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
  const bool tanh_form = approximate == "tanh";
  Tensor out = unary_forward(tanh_form ? kernels::Unary::kGeluTanh : kernels::Unary::kGelu, a,
                             "gelu");
  if (any_requires_grad({a})) wire(std::make_shared<GeluBackward>(a, tanh_form), {a}, {out});
  return out;
}

}  // namespace streamgrad

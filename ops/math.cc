// Element-wise math: exp, log, log1p, sqrt, rsqrt, pow (scalar exponent), tanh, sigmoid,
// erf, sin, cos, relu, abs.
//
// Backward formulas are ops, so that they are differentiable again under create_graph.
// exp, tanh and sigmoid save their output, as the reference does, and use it instead of
// computing the function again (SavedTensor::mark_output_of keeps the output without a
// cycle); with grad mode off, tanh's and sigmoid's are one fused kernel. The others save
// the input. relu's backward selects g where x > 0 (one kernel; under create_graph a
// where() of ops), abs multiplies by a sign mask computed with a kernel (no history):
// their second derivative is zero almost everywhere.
#include "engine/grad_mode.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

// The sign of `x` with no history: abs's gradient mask.
Tensor sign_of(const Tensor& x) {  // -1, 0 or 1
  Tensor m = new_output(x.sizes(), x.dtype(), x.device());
  kernels::unary(stream_of(m), kernels::Unary::kSign, m.view(), x.view());
  return m;
}

// The base of the nodes below: one saved input, one gradient.
struct UnaryBackward : Node {
  UnaryBackward(const Tensor& x, const char* n) : input(x), op_name(n) {}
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {grad(grads[0], input.unpack(op_name))};
  }
  void release_variables() override { input.reset(); }
  virtual Tensor grad(const Tensor& g, const Tensor& x) const = 0;
  SavedTensor input;
  const char* op_name;
};

struct ExpBackward final : UnaryBackward {  // g exp(x), exp(x) the saved output
  explicit ExpBackward(const Tensor& y) : UnaryBackward(y, "ExpBackward") {}
  Tensor grad(const Tensor& g, const Tensor& y) const override { return mul(g, y); }
};

struct Log1pBackward final : UnaryBackward {  // g / (1 + x)
  explicit Log1pBackward(const Tensor& x) : UnaryBackward(x, "Log1pBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override { return div(g, add(x, 1.0)); }
};

struct RsqrtBackward final : UnaryBackward {  // -g x^(-3/2) / 2
  explicit RsqrtBackward(const Tensor& x) : UnaryBackward(x, "RsqrtBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override {
    return mul(g, mul(pow(x, -1.5), -0.5));
  }
};

struct ErfBackward final : UnaryBackward {  // g 2 / sqrt(pi) exp(-x^2)
  explicit ErfBackward(const Tensor& x) : UnaryBackward(x, "ErfBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override {
    return mul(g, mul(exp(neg(mul(x, x))), 1.12837916709551257390));
  }
};

struct SinBackward final : UnaryBackward {  // g cos(x)
  explicit SinBackward(const Tensor& x) : UnaryBackward(x, "SinBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override { return mul(g, cos(x)); }
};

struct CosBackward final : UnaryBackward {  // -g sin(x)
  explicit CosBackward(const Tensor& x) : UnaryBackward(x, "CosBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override { return mul(g, neg(sin(x))); }
};

struct LogBackward final : UnaryBackward {
  explicit LogBackward(const Tensor& x) : UnaryBackward(x, "LogBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override { return div(g, x); }
};

struct SqrtBackward final : UnaryBackward {  // g / (2 sqrt(x))
  explicit SqrtBackward(const Tensor& x) : UnaryBackward(x, "SqrtBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override { return div(g, mul(sqrt(x), 2.0)); }
};

struct PowBackward final : UnaryBackward {  // g e x^(e-1)
  PowBackward(const Tensor& x, double e) : UnaryBackward(x, "PowBackward"), exponent(e) {}
  Tensor grad(const Tensor& g, const Tensor& x) const override {
    if (exponent == 0) return mul(g, 0.0);
    if (exponent == 1) return g;
    if (exponent == 2) return mul(g, mul(x, 2.0));
    return mul(g, mul(pow(x, exponent - 1), exponent));
  }
  double exponent;
};

struct TanhBackward final : UnaryBackward {  // g (1 - y²), y = tanh(x) the saved output
  explicit TanhBackward(const Tensor& y) : UnaryBackward(y, "TanhBackward") {}
  Tensor grad(const Tensor& g, const Tensor& y) const override {
    if (grad_mode_enabled()) return mul(g, sub(1.0, mul(y, y)));
    return binary_kernel(kernels::Binary::kTanhBackward, g, y);
  }
};

struct SigmoidBackward final : UnaryBackward {  // g y (1 - y), y = sigmoid(x) saved
  explicit SigmoidBackward(const Tensor& y) : UnaryBackward(y, "SigmoidBackward") {}
  Tensor grad(const Tensor& g, const Tensor& y) const override {
    if (grad_mode_enabled()) return mul(g, mul(y, sub(1.0, y)));
    return binary_kernel(kernels::Binary::kSigmoidBackward, g, y);
  }
};

struct ReluBackward final : UnaryBackward {  // g (x > 0)
  explicit ReluBackward(const Tensor& x) : UnaryBackward(x, "ReluBackward") {}
  // One kernel, g where x > 0 and 0 elsewhere; under create_graph the same selection by
  // where(), which records g's history (both give 0 where x <= 0, whatever g is).
  Tensor grad(const Tensor& g, const Tensor& x) const override {
    if (grad_mode_enabled()) return where(gt(x, 0.0), g, zeros_like(g));
    return binary_kernel(kernels::Binary::kReluBackward, g, x);
  }
};

struct AbsBackward final : UnaryBackward {  // g sign(x)
  explicit AbsBackward(const Tensor& x) : UnaryBackward(x, "AbsBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override { return mul(g, sign_of(x)); }
};

template <typename NodeT, typename... Args>
void record(const Tensor& a, const Tensor& out, Args... args) {
  if (any_requires_grad({a})) wire(std::make_shared<NodeT>(a, args...), {a}, {out});
}

// The forward kernel `op` and, where needed, a NodeT saving the input.
template <typename NodeT>
Tensor unary_op(kernels::Unary op, const Tensor& a, const char* name) {
  Tensor out = unary_forward(op, a, name);
  record<NodeT>(a, out);
  return out;
}

// A node that saves its own output.
template <typename NodeT>
void record_saving_output(const Tensor& a, const Tensor& out) {
  if (!any_requires_grad({a})) return;
  auto node = std::make_shared<NodeT>(out);
  wire(node, {a}, {out});
  node->input.mark_output_of(node, 0);
}

}  // namespace

Tensor exp(const Tensor& a) {
  SG_AUTOCAST(kFloat32, exp, a);
  Tensor out = unary_forward(kernels::Unary::kExp, a, "exp");
  record_saving_output<ExpBackward>(a, out);
  return out;
}

Tensor log(const Tensor& a) {
  SG_AUTOCAST(kFloat32, log, a);
  return unary_op<LogBackward>(kernels::Unary::kLog, a, "log");
}

Tensor log1p(const Tensor& a) {
  SG_AUTOCAST(kFloat32, log1p, a);
  return unary_op<Log1pBackward>(kernels::Unary::kLog1p, a, "log1p");
}

Tensor rsqrt(const Tensor& a) {
  SG_AUTOCAST(kFloat32, rsqrt, a);
  return unary_op<RsqrtBackward>(kernels::Unary::kRsqrt, a, "rsqrt");
}

Tensor erf(const Tensor& a) {
  return unary_op<ErfBackward>(kernels::Unary::kErf, a, "erf");
}

Tensor sin(const Tensor& a) {
  return unary_op<SinBackward>(kernels::Unary::kSin, a, "sin");
}

Tensor cos(const Tensor& a) {
  return unary_op<CosBackward>(kernels::Unary::kCos, a, "cos");
}

Tensor sqrt(const Tensor& a) {
  return unary_op<SqrtBackward>(kernels::Unary::kSqrt, a, "sqrt");
}

Tensor pow(const Tensor& a, double exponent) {
  SG_AUTOCAST(kFloat32, pow, a, exponent);
  check_defined(a, "pow", "the input");
  check_floating(a, "pow");
  Tensor out = new_output(a.sizes(), a.dtype(), a.device());
  kernels::unary_scalar(stream_of(out), kernels::UnaryScalar::kPow, out.view(), a.view(), exponent);
  record<PowBackward>(a, out, exponent);
  return out;
}

Tensor tanh(const Tensor& a) {
  Tensor out = unary_forward(kernels::Unary::kTanh, a, "tanh");
  record_saving_output<TanhBackward>(a, out);
  return out;
}

Tensor sigmoid(const Tensor& a) {
  Tensor out = unary_forward(kernels::Unary::kSigmoid, a, "sigmoid");
  record_saving_output<SigmoidBackward>(a, out);
  return out;
}

Tensor relu(const Tensor& a) {
  return unary_op<ReluBackward>(kernels::Unary::kRelu, a, "relu");
}

Tensor abs(const Tensor& a) {
  return unary_op<AbsBackward>(kernels::Unary::kAbs, a, "abs");
}

}  // namespace streamgrad

// Element-wise math: exp, log, sqrt, pow (scalar exponent), tanh, sigmoid, relu, abs.
//
// Every backward saves the input (never the output: that would make the output hold its
// own grad_fn) and recomputes what it needs with ops, so that the formulas are
// differentiable again under create_graph. relu's backward selects g where x > 0 (one
// kernel; under create_graph a where() of ops), abs multiplies by a sign mask computed with
// a kernel (no history): their second derivative is zero almost everywhere.
#include "engine/grad_mode.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

Tensor unary_forward(kernels::Unary op, const Tensor& a, const char* name) {
  check_defined(a, name, "the input");
  check_floating(a, name);
  Tensor out = new_output(a.sizes(), a.dtype(), a.device());
  kernels::unary(stream_of(out), op, out.view(), a.view());
  return out;
}

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

struct ExpBackward final : UnaryBackward {
  explicit ExpBackward(const Tensor& x) : UnaryBackward(x, "ExpBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override { return mul(g, exp(x)); }
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

struct TanhBackward final : UnaryBackward {  // g (1 - tanh(x)²)
  explicit TanhBackward(const Tensor& x) : UnaryBackward(x, "TanhBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override {
    const Tensor t = tanh(x);
    return mul(g, sub(1.0, mul(t, t)));
  }
};

struct SigmoidBackward final : UnaryBackward {  // g s (1 - s)
  explicit SigmoidBackward(const Tensor& x) : UnaryBackward(x, "SigmoidBackward") {}
  Tensor grad(const Tensor& g, const Tensor& x) const override {
    const Tensor s = sigmoid(x);
    return mul(g, mul(s, sub(1.0, s)));
  }
};

struct ReluBackward final : UnaryBackward {  // g (x > 0)
  explicit ReluBackward(const Tensor& x) : UnaryBackward(x, "ReluBackward") {}
  // One kernel, g where x > 0 and 0 elsewhere; under create_graph the same selection by
  // where(), which records g's history (both give 0 where x <= 0, whatever g is).
  Tensor grad(const Tensor& g, const Tensor& x) const override {
    if (grad_mode_enabled()) return where(gt(x, 0.0), g, zeros_like(g));
    Tensor out = new_output(x.sizes(), x.dtype(), x.device());
    kernels::binary(stream_of(out), kernels::Binary::kReluBackward, out.view(), g.view(),
                    x.view());
    return out;
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

}  // namespace

Tensor exp(const Tensor& a) {
  SG_AUTOCAST(kFloat32, exp, a);
  Tensor out = unary_forward(kernels::Unary::kExp, a, "exp");
  record<ExpBackward>(a, out);
  return out;
}

Tensor log(const Tensor& a) {
  SG_AUTOCAST(kFloat32, log, a);
  Tensor out = unary_forward(kernels::Unary::kLog, a, "log");
  record<LogBackward>(a, out);
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary_forward(kernels::Unary::kSqrt, a, "sqrt");
  record<SqrtBackward>(a, out);
  return out;
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
  record<TanhBackward>(a, out);
  return out;
}

Tensor sigmoid(const Tensor& a) {
  Tensor out = unary_forward(kernels::Unary::kSigmoid, a, "sigmoid");
  record<SigmoidBackward>(a, out);
  return out;
}

Tensor relu(const Tensor& a) {
  Tensor out = unary_forward(kernels::Unary::kRelu, a, "relu");
  record<ReluBackward>(a, out);
  return out;
}

Tensor abs(const Tensor& a) {
  Tensor out = unary_forward(kernels::Unary::kAbs, a, "abs");
  record<AbsBackward>(a, out);
  return out;
}

}  // namespace streamgrad

// add, sub, mul, div, neg: tensor and scalar forms, with broadcasting. A 0-dim cpu tensor
// beside a tensor on another device acts as a scalar (op_utils.h, operand_on); the nodes
// save it as it is, so backward formulas use it the same way, and grad_for returns its
// gradient to cpu as a 0-dim tensor.
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

// The checked operands of a binary tensor op as its kernel sees them, on the device the
// op runs on (a cpu scalar becomes a 0-dim tensor there), and the broadcast shape.
struct Operands {
  Tensor a, b;
  Shape shape;
};

Operands binary_operands(const Tensor& a, const Tensor& b, const char* name) {
  check_defined(a, name, "the first input");
  check_defined(b, name, "the second input");
  check_binary_devices(a, b, name);
  check_floating(a, name);
  check_same_dtype(a, b, name);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  const Device d = binary_device(a, b);
  return {operand_on(a, d), operand_on(b, d), shape};
}

// Shared forward of the binary tensor ops: checks, broadcast, allocate, launch.
Tensor binary_forward(kernels::Binary op, const Tensor& a, const Tensor& b, const char* name) {
  const Operands in = binary_operands(a, b, name);
  Tensor out = new_output(in.shape, a.dtype(), in.a.device());
  kernels::binary(stream_of(out), op, out.view(), expand_view(in.a, in.shape),
                  expand_view(in.b, in.shape));
  return out;
}

Tensor scalar_forward(kernels::UnaryScalar op, const Tensor& a, double s, const char* name) {
  check_defined(a, name, "the input");
  check_floating(a, name);
  Tensor out = new_output(a.sizes(), a.dtype(), a.device());
  kernels::unary_scalar(stream_of(out), op, out.view(), a.view(), s);
  return out;
}

// Saves input shapes only: the gradient of a ± alpha·b does not depend on the values.
struct AddBackward final : Node {
  AddBackward(InputInfo a, InputInfo b, double alpha)
      : a_in(std::move(a)), b_in(std::move(b)), alpha(alpha) {}
  std::string name() const override { return "AddBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (needs_grad(*this, 0)) out[0] = grad_for(g, a_in);
    if (needs_grad(*this, 1)) out[1] = grad_for(alpha == 1 ? g : mul(g, alpha), b_in);
    return out;
  }
  InputInfo a_in, b_in;
  double alpha;
};

// Saves each input only if the other one needs its gradient.
struct MulBackward final : Node {
  std::string name() const override { return "MulBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (needs_grad(*this, 0)) out[0] = grad_for(mul(g, b.unpack("MulBackward")), a_in);
    if (needs_grad(*this, 1)) out[1] = grad_for(mul(g, a.unpack("MulBackward")), b_in);
    return out;
  }
  void release_variables() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  InputInfo a_in, b_in;
};

struct DivBackward final : Node {
  std::string name() const override { return "DivBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    const Tensor bv = b.unpack("DivBackward");
    TensorList out(2);
    if (needs_grad(*this, 0)) out[0] = grad_for(div(g, bv), a_in);
    if (needs_grad(*this, 1)) {
      const Tensor av = a.unpack("DivBackward");
      out[1] = grad_for(neg(div(mul(g, av), mul(bv, bv))), b_in);  // -g·a/b²
    }
    return out;
  }
  void release_variables() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  InputInfo a_in, b_in;
};

// d(a·s)/da = s: covers mul/div by a scalar and neg.
struct ScaleBackward final : Node {
  ScaleBackward(double s, const char* n) : scale(s), op_name(n) {}
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override { return {mul(grads[0], scale)}; }
  double scale;
  const char* op_name;
};

// d(a + s)/da = 1.
struct IdentityBackward final : Node {
  explicit IdentityBackward(const char* n) : op_name(n) {}
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override { return {grads[0]}; }
  const char* op_name;
};

// d(s / b)/db = -s / b².
struct RDivBackward final : Node {
  std::string name() const override { return "DivBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor bv = b.unpack("DivBackward");
    return {div(mul(grads[0], -s), mul(bv, bv))};
  }
  void release_variables() override { b.reset(); }
  SavedTensor b;
  double s = 0;
};

// add and sub (a + alpha * b with alpha negated): one implementation, whose errors name
// the op the user called.
Tensor add_tensors(const Tensor& a, const Tensor& b, double alpha, const char* name) {
  if (needs_promotion(a, b)) {
    const DType t = promoted_dtype(a, b);
    return add_tensors(to(a, t), to(b, t), alpha, name);
  }
  Tensor out;
  if (alpha == 1) {
    out = binary_forward(kernels::Binary::kAdd, a, b, name);
  } else {
    const Operands in = binary_operands(a, b, name);
    out = new_output(in.shape, a.dtype(), in.a.device());
    kernels::axpy(stream_of(out), out.view(), expand_view(in.a, in.shape),
                  expand_view(in.b, in.shape), alpha);
  }
  if (any_requires_grad({a, b})) {
    wire(std::make_shared<AddBackward>(meta_of(a), meta_of(b), alpha), {a, b}, {out});
  }
  return out;
}

Tensor add_scalar(const Tensor& a, double b, const char* name) {
  Tensor out = scalar_forward(kernels::UnaryScalar::kAdd, a, b, name);
  if (any_requires_grad({a})) wire(std::make_shared<IdentityBackward>("AddBackward"), {a}, {out});
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) { return add_tensors(a, b, alpha, "add"); }

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  return add_tensors(a, b, -alpha, "sub");
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (needs_promotion(a, b)) {
    const DType t = promoted_dtype(a, b);
    return mul(to(a, t), to(b, t));
  }
  Tensor out = binary_forward(kernels::Binary::kMul, a, b, "mul");
  record_product<MulBackward>(a, b, out);
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (needs_promotion(a, b)) {
    const DType t = promoted_dtype(a, b);
    return div(to(a, t), to(b, t));
  }
  Tensor out = binary_forward(kernels::Binary::kDiv, a, b, "div");
  if (any_requires_grad({a, b})) {
    auto node = std::make_shared<DivBackward>();
    if (b.requires_grad()) node->a = SavedTensor(a);
    node->b = SavedTensor(b);
    node->a_in = meta_of(a);
    node->b_in = meta_of(b);
    wire(node, {a, b}, {out});
  }
  return out;
}

Tensor add(const Tensor& a, double b) { return add_scalar(a, b, "add"); }

Tensor sub(const Tensor& a, double b) { return add_scalar(a, -b, "sub"); }

Tensor sub(double a, const Tensor& b) {
  Tensor out = scalar_forward(kernels::UnaryScalar::kRSub, b, a, "sub");
  if (any_requires_grad({b})) wire(std::make_shared<ScaleBackward>(-1, "SubBackward"), {b}, {out});
  return out;
}

Tensor mul(const Tensor& a, double b) {
  Tensor out = scalar_forward(kernels::UnaryScalar::kMul, a, b, "mul");
  if (any_requires_grad({a})) wire(std::make_shared<ScaleBackward>(b, "MulBackward"), {a}, {out});
  return out;
}

Tensor div(const Tensor& a, double b) {
  Tensor out = scalar_forward(kernels::UnaryScalar::kMul, a, 1.0 / b, "div");
  if (any_requires_grad({a})) {
    wire(std::make_shared<ScaleBackward>(1.0 / b, "DivBackward"), {a}, {out});
  }
  return out;
}

Tensor div(double a, const Tensor& b) {
  Tensor out = scalar_forward(kernels::UnaryScalar::kRDiv, b, a, "div");
  if (any_requires_grad({b})) {
    auto node = std::make_shared<RDivBackward>();
    node->b = SavedTensor(b);
    node->s = a;
    wire(node, {b}, {out});
  }
  return out;
}

Tensor neg(const Tensor& a) {
  check_defined(a, "neg", "the input");
  check_floating(a, "neg");
  Tensor out = new_output(a.sizes(), a.dtype(), a.device());
  kernels::unary(stream_of(out), kernels::Unary::kNeg, out.view(), a.view());
  if (any_requires_grad({a})) wire(std::make_shared<ScaleBackward>(-1, "NegBackward"), {a}, {out});
  return out;
}

}  // namespace streamgrad

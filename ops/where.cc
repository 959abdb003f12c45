// where and masked_fill (out of place; masked_fill_ lives with the other in-place ops).
//
// masked_fill(input, mask, value) is where(mask, value, input), as in PyTorch's own
// decomposition: one kernel and one backward serve both. The backward masks the incoming
// gradient with the saved condition (where(c, g, 0) for input, where(c, 0, g) for other),
// built with where itself, so it is differentiable again (create_graph) and a NaN or inf
// in the gradient of the branch not taken never reaches the other operand.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

// What the three operands are called in an op's messages and its backward node.
struct Roles {
  const char* op;
  const char* condition;
  const char* input;
  const char* other;
  const char* node;
};
constexpr Roles kWhere{"where", "condition", "input", "other", "WhereBackward"};
constexpr Roles kMaskedFill{"masked_fill", "mask", "value", "input", "MaskedFillBackward"};

struct WhereBackward final : Node {
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(3);
    if (!g.defined()) return out;
    const Tensor c = condition.unpack(op_name);
    // A 0-dim zero broadcasts against g inside where: no zeros of g's size.
    const Tensor zero = zeros({}, TensorOptions().dtype(g.dtype()).device(g.device()));
    if (needs_grad(*this, 1)) out[1] = grad_for(where(c, g, zero), input_in);
    if (needs_grad(*this, 2)) out[2] = grad_for(where(c, zero, g), other_in);
    return out;
  }
  void release_variables() override { condition.reset(); }
  SavedTensor condition;
  InputInfo input_in, other_in;
  const char* op_name = "WhereBackward";
};

std::string shape_text(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

// The broadcast shape of the three operands; the error names all three.
Shape broadcast3(const Tensor& c, const Tensor& a, const Tensor& b, const Roles& r) {
  const Shape* shapes[] = {&c.sizes(), &a.sizes(), &b.sizes()};
  size_t n = 0;
  for (const Shape* s : shapes) n = std::max(n, s->size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    for (const Shape* s : shapes) {
      if (i < n - s->size()) continue;
      const int64_t d = (*s)[i - (n - s->size())];
      SG_CHECK(d == out[i] || d == 1 || out[i] == 1, ValueError, r.op, ": ", r.condition, " ",
               shape_text(c.sizes()), ", ", r.input, " ", shape_text(a.sizes()), " and ",
               r.other, " ", shape_text(b.sizes()), " cannot be broadcast together (dimension ",
               i, ": ", out[i], " vs ", d, ")");
      if (d != 1) out[i] = d;
    }
  }
  return out;
}

// The device the op runs on: that of the first operand not on cpu (cpu when all are).
// The condition must live there; input and other may also be 0-dim cpu tensors, which
// act as scalars (as PyTorch's cpu scalars).
Device check_devices(const Tensor& c, const Tensor& a, const Tensor& b, const Roles& r) {
  Device d = Device(DeviceType::kCpu);
  for (const Tensor* t : {&c, &a, &b}) {
    if (!t->device().is_cpu()) {
      d = t->device();
      break;
    }
  }
  const auto fits = [d](const Tensor& t) {
    return t.device() == d || (t.dim() == 0 && t.device().is_cpu());
  };
  if (c.device() == d && fits(a) && fits(b)) return d;
  throw DeviceError(absl::StrCat(
      r.op, ": expected all tensors on one device, but got ", r.condition, " ", c.describe(),
      ", ", r.input, " ", a.describe(), " and ", r.other, " ", b.describe(), " (only a 0-dim cpu ",
      r.input, " or ", r.other, " acts as a scalar beside another device); move them with "
      "to(tensor, \"", d.str(), "\")"));
}

// where(c, a, b) with the checks, messages and node name of `r`.
Tensor select(const Tensor& c, const Tensor& a, const Tensor& b, const Roles& r) {
  check_defined(c, r.op, r.condition);
  check_defined(a, r.op, r.input);
  check_defined(b, r.op, r.other);
  check_bool(c, r.op, r.condition);
  SG_CHECK(a.dtype() == b.dtype(), ValueError, r.op, ": ", r.input, " ", a.describe(), " and ",
           r.other, " ", b.describe(), " have different dtypes; convert one with to(tensor, ",
           "dtype)");
  const Device d = check_devices(c, a, b, r);
  const Shape shape = broadcast3(c, a, b, r);
  const Tensor ak = operand_on(a, d);
  const Tensor bk = operand_on(b, d);
  Tensor out = new_output(shape, a.dtype(), d);
  kernels::where(stream_of(out), out.view(), expand_view(c, shape), expand_view(ak, shape),
                 expand_view(bk, shape));
  if (any_requires_grad({a, b})) wire(where_backward(c, a, b, r.node), {c, a, b}, {out});
  return out;
}

}  // namespace

namespace ops_internal {

std::shared_ptr<Node> where_backward(const Tensor& condition, const Tensor& input,
                                     const Tensor& other, const char* name) {
  auto node = std::make_shared<WhereBackward>();
  node->condition = SavedTensor(condition);
  node->input_in = meta_of(input);
  node->other_in = meta_of(other);
  node->op_name = name;
  return node;
}

}  // namespace ops_internal

Tensor where(const Tensor& condition, const Tensor& input, const Tensor& other) {
  SG_AUTOCAST(kPromote, where, condition, input, other);
  if (needs_promotion(input, other)) {
    // Floating operands of two dtypes meet in the promoted one, as in arithmetic (a 0-dim
    // operand defers to a dimensioned one); each gradient comes back in its own dtype.
    const DType t = promoted_dtype(input, other);
    return select(condition, to(input, t), to(other, t), kWhere);
  }
  return select(condition, input, other, kWhere);
}

Tensor masked_fill(const Tensor& input, const Tensor& mask, double value) {
  check_defined(input, "masked_fill", "input");
  check_defined(mask, "masked_fill", "mask");
  check_bool(mask, "masked_fill", "mask");
  check_same_device(input, mask, "masked_fill");
  broadcast_shapes(input.sizes(), mask.sizes(), "masked_fill");  // before allocating
  check_fill_value(value, input.dtype(), "masked_fill");
  const Tensor v = full({}, value, TensorOptions().dtype(input.dtype()).device(input.device()));
  return select(mask, v, input, kMaskedFill);
}

Tensor masked_fill(const Tensor& input, const Tensor& mask, const Tensor& value) {
  check_defined(value, "masked_fill", "value");
  SG_CHECK(value.dim() == 0, ValueError, "masked_fill: value must be a 0-dim tensor, got ",
           value.describe(), "; for a value per element use where(mask, value, input)");
  return select(mask, value, input, kMaskedFill);
}

}  // namespace streamgrad

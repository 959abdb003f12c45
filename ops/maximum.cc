// maximum and minimum, element-wise with broadcasting, as the reference's: a NaN in
// either operand gives NaN. Tensors of one dtype (any), or both floating (they then meet
// in the promoted dtype, as in add; each gradient comes back in its operand's dtype).
//
// The forward is two where()s run without history; the node gives the gradient to the
// larger (maximum) / smaller (minimum) operand, half to each where they are equal, and all
// of it to both where either is NaN (the reference's rule: neither comparison holds
// there). The formula is where()s of the incoming gradient, so it is differentiable again.
#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

struct ExtremaBackward final : Node {
  std::string name() const override { return is_max ? "MaximumBackward" : "MinimumBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (!g.defined()) return out;
    const Tensor x = a.unpack(is_max ? "MaximumBackward" : "MinimumBackward");
    const Tensor y = b.unpack(is_max ? "MaximumBackward" : "MinimumBackward");
    const Tensor zero = zeros({}, TensorOptions().dtype(g.dtype()).device(g.device()));
    const Tensor shared = where(eq(x, y), mul(g, 0.5), g);
    // a loses where b wins, and the other way round.
    const Tensor a_loses = is_max ? lt(x, y) : gt(x, y);
    const Tensor b_loses = is_max ? gt(x, y) : lt(x, y);
    if (needs_grad(*this, 0)) out[0] = grad_for(where(a_loses, zero, shared), a_in);
    if (needs_grad(*this, 1)) out[1] = grad_for(where(b_loses, zero, shared), b_in);
    return out;
  }
  void release_variables() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  InputInfo a_in, b_in;
  bool is_max = true;
};

Tensor extremum(const Tensor& a0, const Tensor& b0, bool is_max) {
  const char* op = is_max ? "maximum" : "minimum";
  check_defined(a0, op, "input");
  check_defined(b0, op, "other");
  Tensor a = a0, b = b0;
  if (needs_promotion(a0, b0)) {
    const DType t = promoted_dtype(a0, b0);
    a = to(a0, t);
    b = to(b0, t);
  }
  SG_CHECK(a.dtype() == b.dtype(), ValueError, op, ": input ", a0.describe(), " and other ",
           b0.describe(), " have different dtypes; convert one with to(tensor, dtype)");
  check_same_device(a, b, op);
  broadcast_shapes(a.sizes(), b.sizes(), op);
  Tensor out;
  {
    NoGradGuard no_grad;
    // b where it wins, else a; then a NaN in b (which no comparison picks) wins too. A NaN
    // in a is kept by the first where, as no comparison with it holds.
    const Tensor first = where(is_max ? lt(a, b) : gt(a, b), b, a);
    out = where(ne(b, b), b, first);
  }
  if (any_requires_grad({a, b})) {
    auto node = std::make_shared<ExtremaBackward>();
    node->a = SavedTensor(a);
    node->b = SavedTensor(b);
    node->a_in = meta_of(a);
    node->b_in = meta_of(b);
    node->is_max = is_max;
    wire(node, {a, b}, {out});
  }
  return out;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(a, b, false); }

}  // namespace streamgrad

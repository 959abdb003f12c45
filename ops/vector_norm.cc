// norm (the reference's torch.norm / linalg.vector_norm on a tensor's elements) and
// baddbmm.
//
// norm's forward runs without history and one node gives its gradient, written with ops
// so that it is differentiable again, with the reference's choices where the chain rule
// is undefined: p = 2 and finite p give 0 where the norm is 0 (not 0/0); inf and -inf
// share the gradient evenly among the elements that attain the extreme (as amax's
// backward does); p = 0 (the count of non-zeros) has a zero gradient; |x| contributes
// sign(x), 0 at 0.
//
// baddbmm(input, b1, b2, beta, alpha) = beta * input + alpha * (b1 @ b2), input
// broadcast to [B, N, P]; with beta 0 the input is not read at all (its NaN and inf do
// not propagate), as in the reference.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

Tensor sign_of(const Tensor& a) {
  const Tensor one = ones({}, TensorOptions().dtype(a.dtype()).device(a.device()));
  const Tensor zero = zeros({}, TensorOptions().dtype(a.dtype()).device(a.device()));
  return where(gt(a, 0.0), one, where(lt(a, 0.0), neg(one), zero));
}

// max (or min) of a over the reduced dims, keepdim.
Tensor extreme(const Tensor& a, const std::vector<bool>& reduced, bool largest) {
  Tensor r = a;
  for (size_t i = 0; i < reduced.size(); ++i) {
    if (!reduced[i]) continue;
    r = largest ? max(r, static_cast<int64_t>(i), true).first
                : min(r, static_cast<int64_t>(i), true).first;
  }
  return r;
}

std::vector<int64_t> dim_list(const std::vector<bool>& reduced) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < reduced.size(); ++i) {
    if (reduced[i]) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

// The norm over the reduced dims, keepdim, without history.
Tensor norm_value(const Tensor& a, double p, const std::vector<bool>& reduced) {
  NoGradGuard no_grad;
  const std::vector<int64_t> dims = dim_list(reduced);
  if (p == 2) return sqrt(sum(mul(a, a), dims, true));
  if (p == 1) return sum(abs(a), dims, true);
  if (p == 0) return sum(to(ne(a, 0.0), a.dtype()), dims, true);
  if (std::isinf(p)) return extreme(abs(a), reduced, p > 0);
  return pow(sum(pow(abs(a), p), dims, true), 1.0 / p);
}

struct NormBackward final : Node {
  std::string name() const override { return "NormBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor x = input.unpack("NormBackward");
    const Tensor r = reshape(result.unpack("NormBackward"), keep_shape);
    const Tensor gk = reshape(g, keep_shape);
    const Tensor zero = zeros({}, TensorOptions().dtype(g.dtype()).device(g.device()));
    if (p == 0) return {mul(x, zero)};
    if (p == 1) return {mul(sign_of(x), gk)};
    if (std::isinf(p)) {
      const Tensor hit = to(eq(abs(x), r), x.dtype());
      const Tensor ties = sum(hit, dims, true);
      return {mul(mul(sign_of(x), hit), div(gk, ties))};
    }
    if (p == 2) return {mul(x, where(eq(r, 0.0), zero, div(gk, r)))};
    // d/dx (sum |x|^p)^(1/p) = sign(x) |x|^(p-1) / r^(p-1).
    const Tensor scale = where(eq(r, 0.0), zero, div(gk, pow(r, p - 1)));
    return {mul(mul(sign_of(x), pow(abs(x), p - 1)), scale)};
  }
  void release_variables() override {
    input.reset();
    result.reset();
  }
  SavedTensor input, result;
  std::vector<int64_t> dims;
  Shape keep_shape;
  double p = 2;
};

}  // namespace

Tensor norm(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  check_defined(a, "norm", "the input");
  check_floating(a, "norm");
  SG_CHECK(!std::isnan(p), ValueError, "norm: p must be a number, got NaN");
  const std::vector<bool> reduced = reduced_dims(a, dims, "norm");
  SG_CHECK(a.numel() > 0 || !std::isinf(p), ValueError, "norm: the ", p > 0 ? "" : "-",
           "inf norm of an empty tensor ", a.describe(), " is undefined (no element to take "
           "the extreme of), as in the reference");
  const Tensor kept = norm_value(a, p, reduced);
  Shape out_shape;
  for (size_t i = 0; i < reduced.size(); ++i) {
    if (keepdim || !reduced[i]) out_shape.push_back(kept.size(static_cast<int64_t>(i)));
  }
  Tensor out;
  {
    NoGradGuard no_grad;
    out = keepdim ? kept : reshape(kept, out_shape);
  }
  if (any_requires_grad({a})) {
    auto node = std::make_shared<NormBackward>();
    node->input = SavedTensor(a);
    node->dims = dim_list(reduced);
    node->keep_shape = kept.sizes();
    node->p = p;
    out = streamgrad::clone(out);  // a result of its own, not a view of `kept`
    wire(node, {a}, {out});
    node->result = SavedTensor(out);
    node->result.mark_output_of(node, 0);
  }
  return out;
}

Tensor norm(const Tensor& a, double p) { return norm(a, p, {}, false); }

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, double beta,
               double alpha) {
  check_defined(input, "baddbmm", "input");
  const Tensor product = bmm(batch1, batch2);
  const Tensor scaled = alpha == 1 ? product : mul(product, alpha);
  const Shape want = broadcast_shapes(input.sizes(), product.sizes(), "baddbmm");
  SG_CHECK(want == product.sizes(), ValueError, "baddbmm: input ", input.describe(),
           " does not broadcast to the product's shape [", absl::StrJoin(product.sizes(), ", "),
           "] (batch1 ", batch1.describe(), " @ batch2 ", batch2.describe(), ")");
  if (beta == 0) return scaled;  // input not read: its NaN and inf do not propagate
  return add(beta == 1 ? input : mul(input, beta), scaled);
}

}  // namespace streamgrad

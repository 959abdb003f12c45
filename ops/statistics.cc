// var, std and logsumexp over all or chosen dims, as the reference's.
//
// var is composed of ops: sum((x - mean(x))^2) / max(0, N - correction), so its gradient
// 2 (x - mean) / (N - correction) comes from autograd and is differentiable again. N -
// correction <= 0 divides by zero, as the reference does (NaN for a zero sum, inf else).
//
// std = sqrt(var) has its own node, because the reference sets std's gradient to zero
// where the result is zero (constant input) instead of the inf * 0 = NaN that the chain
// rule through sqrt gives; the node's formula is written with ops, so it is differentiable
// again.
//
// logsumexp shifts by the maximum over the reduced dims, taken without history: the shift
// cancels in the result, so autograd gives g * softmax(x) and large inputs neither
// overflow nor lose the small terms. An infinite maximum is replaced by 0 before shifting,
// so that all -inf gives -inf and a +inf gives +inf (not NaN), as in the reference.
#include <algorithm>
#include <limits>

#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

// What a statistic over `dims` of `a` reduces: the shape with 1 at the reduced dims, and
// the number of elements each result element summarises.
struct Span {
  Shape keep;
  int64_t count = 1;
};

Span span_of(const Tensor& a, const std::vector<int64_t>& dims, const char* op) {
  const std::vector<bool> reduced = reduced_dims(a, dims, op);
  Span r{a.sizes(), 1};
  for (size_t i = 0; i < reduced.size(); ++i) {
    if (!reduced[i]) continue;
    r.count *= r.keep[i];
    r.keep[i] = 1;
  }
  return r;
}

void check_input(const Tensor& a, const char* op) {
  check_defined(a, op, "the input");
  check_floating(a, op);
}

// sum((a - mean)^2) over dims / max(0, count - correction), with history.
Tensor variance(const Tensor& a, const std::vector<int64_t>& dims, double correction,
                bool keepdim, int64_t count) {
  const Tensor centered = sub(a, mean(a, dims, /*keepdim=*/true));
  const double divisor = std::max(0.0, static_cast<double>(count) - correction);
  return div(sum(mul(centered, centered), dims, keepdim), divisor);
}

// d std / dx = (2 (x - mean) / divisor) * g / (2 std), and 0 where std is 0.
struct StdBackward final : Node {
  std::string name() const override { return "StdBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor x = input.unpack("StdBackward");
    const Tensor r = reshape(result.unpack("StdBackward"), keep_shape);
    const Tensor gk = reshape(g, keep_shape);
    const Tensor zero = zeros({}, TensorOptions().dtype(g.dtype()).device(g.device()));
    const Tensor scaled = where(eq(r, 0.0), zero, div(gk, r));  // g / (2 std) times 2
    return {mul(mul(scaled, sub(x, mean(x, dims, /*keepdim=*/true))), 1.0 / divisor)};
  }
  void release_variables() override {
    input.reset();
    result.reset();
  }
  SavedTensor input, result;
  std::vector<int64_t> dims;
  Shape keep_shape;
  double divisor = 1;
};

}  // namespace

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  check_input(a, "var");
  const Span r = span_of(a, dims, "var");
  return variance(a, dims, correction, keepdim, r.count);
}

Tensor var(const Tensor& a) { return var(a, {}, 1, false); }

Tensor std(const Tensor& a, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  check_input(a, "std");
  const Span r = span_of(a, dims, "std");
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sqrt(variance(a, dims, correction, keepdim, r.count));
  }
  if (any_requires_grad({a})) {
    auto node = std::make_shared<StdBackward>();
    node->input = SavedTensor(a);
    node->dims = dims;
    node->keep_shape = r.keep;
    node->divisor = std::max(0.0, static_cast<double>(r.count) - correction);
    wire(node, {a}, {out});
    node->result = SavedTensor(out);
    node->result.mark_output_of(node, 0);
  }
  return out;
}

Tensor std(const Tensor& a) { return std(a, {}, 1, false); }

Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  check_input(a, "logsumexp");
  const std::vector<bool> reduced = reduced_dims(a, dims, "logsumexp");
  Tensor shift;
  {
    NoGradGuard no_grad;
    const Tensor zero = zeros({}, TensorOptions().dtype(a.dtype()).device(a.device()));
    // An empty input has no maximum: shifted by 0, an empty sum gives log 0 = -inf.
    shift = a.numel() == 0 ? zero : a.detach();
    for (size_t i = 0; i < reduced.size() && a.numel() > 0; ++i) {
      if (reduced[i]) shift = max(shift, static_cast<int64_t>(i), /*keepdim=*/true).first;
    }
    shift = where(eq(abs(shift), std::numeric_limits<double>::infinity()), zero, shift);
  }
  const Tensor s = log(sum(exp(sub(a, shift)), dims, /*keepdim=*/true));
  Tensor out = add(s, shift);
  if (!keepdim) {
    Shape shape;
    for (size_t i = 0; i < reduced.size(); ++i) {
      if (!reduced[i]) shape.push_back(a.size(static_cast<int64_t>(i)));
    }
    out = reshape(out, shape);
  }
  return out;
}

}  // namespace streamgrad

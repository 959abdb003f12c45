// reshape, view, expand, clone, contiguous.
#include "absl/strings/str_join.h"
#include "engine/accumulate_grad.h"
#include "engine/view_history.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// Resolves one -1 in `sizes` against `numel`.
Shape infer_shape(const Shape& sizes, int64_t numel, const char* op) {
  Shape out = sizes;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    SG_CHECK(out[i] >= -1, ValueError, op, ": invalid size ", out[i], " in [",
             absl::StrJoin(sizes, ", "), "]; sizes must be >= 0, or -1 for one inferred size");
    if (out[i] != -1) continue;
    SG_CHECK(infer < 0, ValueError, op, ": only one dimension can be -1 in [",
             absl::StrJoin(sizes, ", "), "]");
    infer = static_cast<int>(i);
  }
  if (infer >= 0) out[infer] = 1;
  // Checked: the product of absurd sizes must not wrap around to a plausible count.
  const int64_t known = checked_numel(out, op);
  if (infer >= 0) {
    SG_CHECK(known != 0 && numel % known == 0, ValueError, op, ": shape [",
             absl::StrJoin(sizes, ", "), "] is invalid for ", numel, " elements");
    out[infer] = numel / known;
  }
  SG_CHECK(numel_of(out) == numel, ValueError, op, ": shape [", absl::StrJoin(sizes, ", "),
           "] is invalid for an input of ", numel, " elements");
  return out;
}

struct ReshapeBackward final : Node {
  explicit ReshapeBackward(Shape s) : input_shape(std::move(s)) {}
  std::string name() const override { return "ReshapeBackward"; }
  TensorList apply(TensorList&& grads) override { return {reshape(grads[0], input_shape)}; }
  Shape input_shape;
};

struct ExpandBackward final : Node {
  explicit ExpandBackward(Shape s) : input_shape(std::move(s)) {}
  std::string name() const override { return "ExpandBackward"; }
  TensorList apply(TensorList&& grads) override { return {sum_to(grads[0], input_shape)}; }
  Shape input_shape;
};

struct CloneBackward final : Node {
  std::string name() const override { return "CloneBackward"; }
  TensorList apply(TensorList&& grads) override { return {grads[0]}; }
};

}  // namespace

Tensor view(const Tensor& a, const Shape& sizes) {
  check_defined(a, "view", "the input");
  const Shape shape = infer_shape(sizes, a.numel(), "view");
  SG_CHECK(a.is_contiguous(), ValueError, "view: the input ", a.describe(),
           " is not contiguous, so it cannot be viewed as [", absl::StrJoin(shape, ", "),
           "]; use reshape() (which copies) or contiguous() first");
  Tensor out = make_view(a, shape, kernels::contiguous_strides(shape), a.storage_offset());
  mark_differentiable_view(out, a);
  if (any_requires_grad({a})) wire(std::make_shared<ReshapeBackward>(a.sizes()), {a}, {out});
  return out;
}

Tensor reshape(const Tensor& a, const Shape& sizes) {
  check_defined(a, "reshape", "the input");
  const Shape shape = infer_shape(sizes, a.numel(), "reshape");  // errors name reshape
  if (a.is_contiguous()) return view(a, shape);
  return view(contiguous(a), shape);
}

Tensor expand(const Tensor& a, const Shape& sizes) {
  check_defined(a, "expand", "the input");
  SG_CHECK(sizes.size() >= a.sizes().size(), ValueError, "expand: cannot expand ", a.describe(),
           " to fewer dimensions [", absl::StrJoin(sizes, ", "), "]");
  const size_t lead = sizes.size() - a.sizes().size();
  Shape shape = sizes;
  for (size_t i = 0; i < shape.size(); ++i) {
    // As in PyTorch: -1 keeps an existing size and is refused for new leading dims.
    const bool existing = i >= lead;
    if (existing && shape[i] == -1) shape[i] = a.sizes()[i - lead];
    SG_CHECK(shape[i] >= 0, ValueError, "expand: size ", sizes[i], " at dimension ", i, " of [",
             absl::StrJoin(sizes, ", "), "] is not allowed",
             existing ? "" : " for a new leading dimension", " (expanding ", a.describe(), ")");
    if (!existing) continue;
    const int64_t have = a.sizes()[i - lead];
    SG_CHECK(have == shape[i] || have == 1, ValueError, "expand: cannot expand ", a.describe(),
             " to [", absl::StrJoin(sizes, ", "), "]: dimension ", i, " has size ", have,
             " (only size-1 dimensions can be expanded)");
  }
  checked_numel(shape, "expand");
  if (shape == a.sizes()) return a;
  const kernels::View v = expand_view(a, shape);
  Tensor out = make_view(a, shape, v.strides, a.storage_offset());
  mark_differentiable_view(out, a);
  if (any_requires_grad({a})) wire(std::make_shared<ExpandBackward>(a.sizes()), {a}, {out});
  return out;
}

Tensor clone(const Tensor& a) {
  check_defined(a, "clone", "the input");
  Tensor out = clone_detached(a);
  if (any_requires_grad({a})) wire(std::make_shared<CloneBackward>(), {a}, {out});
  return out;
}

Tensor contiguous(const Tensor& a) {
  check_defined(a, "contiguous", "the input");
  return a.is_contiguous() ? a : clone(a);
}

}  // namespace streamgrad

// cat and stack.
//
// Each is one op: one kernel launch copies every input into its place in a fresh output
// (floating inputs of several dtypes are converted to their promotion first),
// and one backward node hands each input a view of the incoming gradient (no copies):
// cat the matching narrow(), stack the index along the new dim. Under create_graph the
// views are differentiable again.
#include "absl/strings/str_join.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

struct CatBackward final : Node {
  std::string name() const override { return "CatBackward"; }
  TensorList apply(TensorList&& grads) override {
    TensorList out(sizes.size());
    if (!grads[0].defined()) return out;
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (needs_grad(*this, i)) out[i] = narrow(grads[0], dim, offset, sizes[i]);
      offset += sizes[i];
    }
    return out;
  }
  int64_t dim = 0;
  std::vector<int64_t> sizes;  // each input's extent along dim
};

// g's index i along dim d, without d: a view of g. Built with make_view when no history
// is needed (one handle per input, the common backward), with narrow + squeeze when it is
// (create_graph).
Tensor select_view(const Tensor& g, int64_t d, int64_t i) {
  if (any_requires_grad({g})) return squeeze(narrow(g, d, i, 1), d);
  Shape sizes = g.sizes(), strides = g.strides();
  const int64_t offset = g.storage_offset() + i * strides[d];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return make_view(g, sizes, strides, offset);
}

struct StackBackward final : Node {
  std::string name() const override { return "StackBackward"; }
  TensorList apply(TensorList&& grads) override {
    TensorList out(num_outputs());
    if (!grads[0].defined()) return out;
    for (size_t i = 0; i < out.size(); ++i) {
      if (needs_grad(*this, i)) out[i] = select_view(grads[0], dim, static_cast<int64_t>(i));
    }
    return out;
  }
  int64_t dim = 0;
};

std::string shape_str(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

// The common checks of cat and stack: a non-empty list of defined tensors on one device,
// of one dtype or all floating. Returns the result's dtype: the one dtype, or the
// promotion of the floating ones (as the reference, where every input has dims).
DType check_list(const std::vector<Tensor>& tensors, const char* op) {
  SG_CHECK(!tensors.empty(), ValueError, op, ": expected a non-empty list of tensors");
  DType common = DType::kFloat32;
  for (size_t i = 0; i < tensors.size(); ++i) {
    SG_CHECK(tensors[i].defined(), ValueError, op, ": tensor ", i, " is undefined");
    check_same_device(tensors[0], tensors[i], op);
    const DType t = tensors[i].dtype();
    const bool both_floating = is_floating(t) && is_floating(tensors[0].dtype());
    SG_CHECK(t == tensors[0].dtype() || both_floating, ValueError, op,
             ": all tensors must have one dtype, or all be floating, but tensor 0 is ",
             tensors[0].describe(), " and tensor ", i, " is ", tensors[i].describe(),
             "; convert one with to(tensor, dtype)");
    common = i == 0 ? t : promote_floating(common, t);
  }
  return common;
}

// `tensors` converted to `dtype` where they differ (recorded: the gradient of each input
// comes back in its own dtype).
std::vector<Tensor> converted(const std::vector<Tensor>& tensors, DType dtype) {
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(to(t, dtype));
  return out;
}

bool any_other_dtype(const std::vector<Tensor>& tensors, DType dtype) {
  for (const Tensor& t : tensors) {
    if (t.dtype() != dtype) return true;
  }
  return false;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  SG_AUTOCAST(kPromote, cat, tensors, dim);
  const DType dtype = check_list(tensors, "cat");
  const Tensor& first = tensors[0];
  SG_CHECK(first.dim() > 0, ValueError, "cat: zero-dimensional tensor ", first.describe(),
           " cannot be concatenated; unsqueeze it or use stack()");
  const int64_t d = wrap_dim(dim, first.dim(), "cat");
  Shape shape = first.sizes();
  shape[d] = 0;
  std::vector<int64_t> extents;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool fits = t.dim() == first.dim();
    for (int64_t k = 0; fits && k < t.dim(); ++k) fits = k == d || t.sizes()[k] == first.sizes()[k];
    SG_CHECK(fits, ValueError, "cat: tensor ", i, " ", t.describe(), " does not match tensor 0 ",
             first.describe(), "; sizes must agree except on dimension ", dim);
    extents.push_back(t.sizes()[d]);
    SG_CHECK(!__builtin_add_overflow(shape[d], t.sizes()[d], &shape[d]), ValueError,
             "cat: the sizes along dimension ", dim, " add up to more than int64 can count");
  }
  if (any_other_dtype(tensors, dtype)) return cat(converted(tensors, dtype), dim);
  Tensor out = new_output(shape, first.dtype(), first.device());
  std::vector<kernels::View> views;
  views.reserve(tensors.size());
  for (const Tensor& t : tensors) views.push_back(t.view());
  kernels::cat(stream_of(out), out.view(), views, d);
  if (any_requires_grad(tensors)) {
    auto node = std::make_shared<CatBackward>();
    node->dim = d;
    node->sizes = extents;
    wire(node, tensors, {out});
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  SG_AUTOCAST(kPromote, stack, tensors, dim);
  const DType dtype = check_list(tensors, "stack");
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<kernels::View> views;
  views.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SG_CHECK(tensors[i].sizes() == tensors[0].sizes(), ValueError,
             "stack: all tensors must have one shape, but tensor 0 is ",
             shape_str(tensors[0].sizes()), " and tensor ", i, " is ",
             shape_str(tensors[i].sizes()));
    views.push_back(tensors[i].view());
  }
  if (any_other_dtype(tensors, dtype)) return stack(converted(tensors, dtype), dim);
  Shape shape = tensors[0].sizes();
  shape.insert(shape.begin() + d, static_cast<int64_t>(tensors.size()));
  Tensor out = new_output(shape, tensors[0].dtype(), tensors[0].device());
  kernels::stack(stream_of(out), out.view(), views, d);
  if (any_requires_grad(tensors)) {
    auto node = std::make_shared<StackBackward>();
    node->dim = d;
    wire(node, tensors, {out});
  }
  return out;
}

}  // namespace streamgrad

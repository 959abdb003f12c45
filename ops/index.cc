// index_select along a dim with a 1-D int64 index.
//
// Backward adds the gradient into zeros at the selected positions (index_add, so repeated
// indices accumulate) through an internal op whose own backward is index_select again:
// differentiable to any order.
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// A 0-dim index selects one entry, as a 1-D index of one element would.
kernels::View index_view(const Tensor& index) {
  kernels::View v = index.view();
  if (index.dim() == 0) {
    v.sizes = {1};
    v.strides = {1};
  }
  return v;
}

Tensor index_add_into_zeros(const Tensor& g, int64_t dim, const Tensor& index, const Shape& shape);

struct IndexSelectBackward final : Node {
  std::string name() const override { return "IndexSelectBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {index_add_into_zeros(grads[0], dim, index.unpack("IndexSelectBackward"), input_shape)};
  }
  void release_variables() override { index.reset(); }
  SavedTensor index;
  int64_t dim = 0;
  Shape input_shape;
};

struct IndexAddBackward final : Node {
  std::string name() const override { return "IndexSelectBackwardBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {index_select(grads[0], dim, index.unpack("IndexSelectBackwardBackward"))};
  }
  void release_variables() override { index.reset(); }
  SavedTensor index;
  int64_t dim = 0;
};

Tensor index_add_into_zeros(const Tensor& g, int64_t dim, const Tensor& index, const Shape& shape) {
  Tensor out = zeros(shape, TensorOptions().dtype(g.dtype()).device(g.device()));
  kernels::index_add(stream_of(out), out.view(), dim, index_view(index), g.view());
  if (any_requires_grad({g})) {
    auto node = std::make_shared<IndexAddBackward>();
    node->index = SavedTensor(index);
    node->dim = dim;
    wire(node, {g}, {out});
  }
  return out;
}

}  // namespace

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  check_defined(a, "index_select", "the input");
  check_defined(index, "index_select", "the index");
  check_same_device(a, index, "index_select");
  SG_CHECK(index.dtype() == DType::kInt64 && index.dim() <= 1, ValueError,
           "index_select: the index must be a 1-D int64 tensor, got ", index.describe());
  SG_CHECK(a.dim() > 0, ValueError, "index_select: cannot index a 0-dim tensor (", a.describe(),
           ")");
  const int64_t d = wrap_dim(dim, a.dim(), "index_select");
  Shape shape = a.sizes();
  shape[d] = index.numel();
  Tensor out = new_output(shape, a.dtype(), a.device());
  // Out-of-range indices: ValueError here on cpu; on sim at the stream's next sync.
  kernels::index_select(stream_of(out), out.view(), a.view(), d, index_view(index));
  if (any_requires_grad({a})) {
    auto node = std::make_shared<IndexSelectBackward>();
    node->index = SavedTensor(index);
    node->dim = d;
    node->input_shape = a.sizes();
    wire(node, {a}, {out});
  }
  return out;
}

}  // namespace streamgrad

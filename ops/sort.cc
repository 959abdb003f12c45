// topk, sort and argsort along a dim, as the reference's: one sort kernel
// (kernels::sort) gives the values and their int64 positions, NaN counting as larger
// than every number and equal values in index order (a stable sort in both directions;
// topk's sorted = false returns the same sorted order, which the reference allows).
//
// The backward puts each incoming gradient element at the position its value came from
// and zero elsewhere: scatter_add into zeros, whose own backward is a gather, so the
// result is differentiable again. The node saves only the indices.
#include <algorithm>
#include <string>
#include <tuple>

#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

struct SortBackward final : Node {
  explicit SortBackward(const char* n) : op_name(n) {}
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor idx = indices.unpack(op_name);
    const TensorOptions o = TensorOptions().dtype(g.dtype()).device(g.device());
    // A 0-dim input was sorted as [1]: its gradient is g's one element (none for k = 0).
    if (input.sizes.empty()) return {g.numel() == 1 ? reshape(g, {}) : zeros({}, o)};
    return {scatter_add(zeros(input.sizes, o), dim, idx, g)};
  }
  void release_variables() override { indices.reset(); }
  SavedTensor indices;
  InputInfo input;
  int64_t dim = 0;
  const char* op_name;
};

// The first k of each slice along dim in order; `op` names the user's call.
std::tuple<Tensor, Tensor> sorted_slices(const Tensor& x, int64_t k, int64_t dim,
                                         bool descending, const char* op,
                                         const char* node_name) {
  check_defined(x, op, "the input");
  SG_CHECK(is_floating(x.dtype()) || x.dtype() == DType::kInt64, ValueError, op, ": input ",
           x.describe(), " cannot be ordered; pass a floating or int64 tensor (convert bool "
           "with to(x, DType::kInt64))");
  const int64_t rank = std::max<int64_t>(x.dim(), 1);
  const int64_t d = wrap_dim(dim, rank, op);
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  SG_CHECK(k >= 0 && k <= n, ValueError, op, ": k = ", k, " is out of range for dim ", dim,
           " of ", x.describe(), ", which has ", n, " elements; pass k in 0..", n);
  Shape shape = x.dim() == 0 ? Shape{1} : x.sizes();
  shape[d] = k;
  Tensor values = new_output(shape, x.dtype(), x.device());
  Tensor indices = new_output(shape, DType::kInt64, x.device());
  kernels::View in = x.view();
  if (x.dim() == 0) {
    in.sizes = {1};
    in.strides = {1};
  }
  kernels::sort(stream_of(values), values.view(), indices.view(), in, d, descending, op);
  if (x.dim() == 0 && k == 1) {  // k = 0 leaves [0], as no 0-dim tensor is empty
    values = reshape(values, {});
    indices = reshape(indices, {});
  }
  if (any_requires_grad({x})) {
    auto node = std::make_shared<SortBackward>(node_name);
    node->indices = SavedTensor(indices);
    node->input = meta_of(x);
    node->dim = d;
    wire(node, {x}, {values});
  }
  return {values, indices};
}

int64_t size_along(const Tensor& x, int64_t dim, const char* op) {
  check_defined(x, op, "the input");
  if (x.dim() == 0) {
    wrap_dim(dim, 1, op);
    return 1;
  }
  return x.size(wrap_dim(dim, x.dim(), op));
}

}  // namespace

std::tuple<Tensor, Tensor> topk(const Tensor& input, int64_t k, int64_t dim, bool largest,
                                bool /*sorted*/) {
  return sorted_slices(input, k, dim, largest, "topk", "TopkBackward");
}

std::tuple<Tensor, Tensor> sort(const Tensor& input, int64_t dim, bool descending) {
  return sorted_slices(input, size_along(input, dim, "sort"), dim, descending, "sort",
                       "SortBackward");
}

std::tuple<Tensor, Tensor> sort(const Tensor& input, std::optional<bool> /*stable*/,
                                int64_t dim, bool descending) {
  return sort(input, dim, descending);
}

Tensor argsort(const Tensor& input, int64_t dim, bool descending) {
  NoGradGuard no_grad;  // the indices have no gradient: record no node for the values
  return std::get<1>(sorted_slices(input, size_along(input, dim, "argsort"), dim, descending,
                                   "argsort", "ArgsortBackward"));
}

Tensor argsort(const Tensor& input, std::optional<bool> /*stable*/, int64_t dim,
               bool descending) {
  return argsort(input, dim, descending);
}

}  // namespace streamgrad

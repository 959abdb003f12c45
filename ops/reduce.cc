// sum and mean over all or chosen dims; max and min along a dim.
#include <algorithm>

#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// The keepdim shape of reducing `sizes` over `dims` (all dims when empty).
Shape keepdim_shape(const Shape& sizes, const std::vector<bool>& reduced) {
  Shape out = sizes;
  for (size_t i = 0; i < out.size(); ++i) {
    if (reduced[i]) out[i] = 1;
  }
  return out;
}

Shape squeeze_reduced(const Shape& sizes, const std::vector<bool>& reduced) {
  Shape out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!reduced[i]) out.push_back(sizes[i]);
  }
  return out;
}

// The gradient of a sum broadcasts back over the reduced dims.
struct SumBackward final : Node {
  std::string name() const override { return "SumBackward"; }
  TensorList apply(TensorList&& grads) override {
    return {expand(reshape(grads[0], keep_shape), input_shape)};
  }
  Shape input_shape, keep_shape;
};

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  SG_AUTOCAST(kFloat32, sum, a, dims, keepdim);
  check_defined(a, "sum", "the input");
  check_floating(a, "sum");
  const std::vector<bool> reduced = reduced_dims(a, dims, "sum");
  const Shape keep = keepdim_shape(a.sizes(), reduced);
  // Allocated in its final shape (not a view of a hidden keepdim tensor: views of the
  // result must have it as their base for check_inplace).
  Tensor out = new_output(keepdim ? keep : squeeze_reduced(keep, reduced), a.dtype(), a.device());
  kernels::reduce(stream_of(out), kernels::Reduce::kSum, contiguous_view_as(out, keep), a.view());
  if (any_requires_grad({a})) {
    auto node = std::make_shared<SumBackward>();
    node->input_shape = a.sizes();
    node->keep_shape = keep;
    wire(node, {a}, {out});
  }
  return out;
}

Tensor sum(const Tensor& a) { return sum(a, {}, false); }

}  // namespace streamgrad

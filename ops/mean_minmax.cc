// mean over all or chosen dims; max and min along a dim (values and int64 indices).
//
// mean's backward spreads g / count back over the reduced dims. max/min's backward puts
// the gradient at the arg-max positions: with a plain scatter_add into zeros for a
// first-order backward, and, under create_graph, as g (expanded) times a one-hot mask of
// the positions — the same values, built from ops, so that it is differentiable again.
#include <limits>

#include "engine/grad_mode.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

struct MeanBackward final : Node {
  std::string name() const override { return "MeanBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {mul(expand(reshape(grads[0], keep_shape), input_shape), scale)};
  }
  Shape input_shape, keep_shape;
  double scale = 1;
};

// `v` with a size-1 dim inserted at `dim` (the keepdim form of a reduced result).
kernels::View keep_view(kernels::View v, int64_t dim) {
  v.sizes.insert(v.sizes.begin() + dim, 1);
  v.strides.insert(v.strides.begin() + dim, 1);
  return v;
}

// The one-hot mask of `indices` (a keepdim-form int64 view) along `dim` in `shape`.
Tensor index_mask(const kernels::View& indices, int64_t dim, const Shape& shape, DType dtype,
                  Device device) {
  const TensorOptions o = TensorOptions().dtype(dtype).device(device);
  Tensor mask = zeros(shape, o);
  Tensor one = ones({}, o);
  const kernels::View src = expand_view(one, indices.sizes);
  kernels::scatter_add(stream_of(mask), mask.view(), dim, indices, src);
  return mask;
}

// Gradient of max/min along `dim`: g at the selected position, zeros elsewhere.
struct ExtremumBackward final : Node {
  explicit ExtremumBackward(const char* n) : op_name(n) {}
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor idx = indices.unpack(op_name);  // the returned indices
    const kernels::View iv = contiguous_view_as(idx, keep_shape);
    Tensor out;
    if (!grad_mode_enabled()) {
      out = zeros(work_shape, TensorOptions().dtype(g.dtype()).device(g.device()));
      const kernels::View src = keepdim ? g.view() : keep_view(g.view(), dim);
      kernels::scatter_add(stream_of(out), out.view(), dim, iv, src);
    } else {
      const Tensor gk = reshape(g, keep_shape);
      out = mul(expand(gk, work_shape), index_mask(iv, dim, work_shape, g.dtype(), g.device()));
    }
    if (out.sizes() != input_shape) out = reshape(out, input_shape);
    return {out};
  }
  void release_variables() override { indices.reset(); }
  SavedTensor indices;
  // A 0-dim input is worked on as [1]; keep_shape is work_shape with 1 at dim.
  Shape input_shape, work_shape, keep_shape;
  int64_t dim = 0;
  bool keepdim = false;  // the gradient arrives in keepdim form
  const char* op_name;
};

std::pair<Tensor, Tensor> extremum(const Tensor& a, int64_t dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "max" : "min";
  check_defined(a, name, "the input");
  check_floating(a, name);
  const int64_t d = wrap_dim(dim, a.dim(), name);
  // A 0-dim input is reduced as a [1] tensor; its results are 0-dim again.
  const Shape work = a.dim() == 0 ? Shape{1} : a.sizes();
  SG_CHECK(work[d] > 0, ValueError, name, ": cannot reduce ", a.describe(), " along dimension ",
           dim, ", which is empty");
  Shape keep = work;
  keep[d] = 1;
  // The results in their final shape; the kernel sees them in keepdim form.
  Shape shape = keep;
  if (a.dim() == 0) {
    shape = {};
  } else if (!keepdim) {
    shape.erase(shape.begin() + d);
  }
  Tensor values = new_output(shape, a.dtype(), a.device());
  Tensor indices = new_output(shape, DType::kInt64, a.device());
  kernels::View in = a.view();
  if (a.dim() == 0) {
    in.sizes = {1};
    in.strides = {1};
  }
  kernels::arg_reduce(stream_of(values), is_max, contiguous_view_as(values, keep),
                      contiguous_view_as(indices, keep), in, d);
  if (any_requires_grad({a})) {
    auto node = std::make_shared<ExtremumBackward>(is_max ? "MaxBackward" : "MinBackward");
    node->indices = SavedTensor(indices);
    node->input_shape = a.sizes();
    node->work_shape = work;
    node->keep_shape = keep;
    node->dim = d;
    node->keepdim = keepdim && a.dim() > 0;
    wire(node, {a}, {values});
  }
  return {values, indices};
}

}  // namespace

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  SG_AUTOCAST(kFloat32, mean, a, dims, keepdim);
  check_defined(a, "mean", "the input");
  check_floating(a, "mean");
  const std::vector<bool> reduced = reduced_dims(a, dims, "mean");
  Shape keep = a.sizes(), squeezed;
  int64_t count = 1;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (reduced[i]) {
      count *= keep[i];
      keep[i] = 1;
    } else {
      squeezed.push_back(keep[i]);
    }
  }
  Tensor out = new_output(keepdim ? keep : squeezed, a.dtype(), a.device());
  const Stream s = stream_of(out);
  kernels::reduce(s, kernels::Reduce::kSum, contiguous_view_as(out, keep), a.view());
  // The mean of nothing is NaN (0 / 0), as in numpy.
  const double scale = count == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / count;
  kernels::unary_scalar(s, kernels::UnaryScalar::kMul, out.view(), out.view(), scale);
  if (any_requires_grad({a})) {
    auto node = std::make_shared<MeanBackward>();
    node->input_shape = a.sizes();
    node->keep_shape = keep;
    node->scale = count == 0 ? 0.0 : 1.0 / count;
    wire(node, {a}, {out});
  }
  return out;
}

Tensor mean(const Tensor& a) { return mean(a, {}, false); }

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return extremum(a, dim, keepdim, /*is_max=*/true);
}

std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return extremum(a, dim, keepdim, /*is_max=*/false);
}

}  // namespace streamgrad

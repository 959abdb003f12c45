// batch_norm. Training normalises with the batch's mean and biased variance and moves the
// running statistics (when given) toward the batch's mean and unbiased variance, in place
// and without history, on the current stream; eval normalises with the running statistics.
//
// Training is one fused kernel forward and one backward (kernels/nn_kernels.h) where the
// composition of mean, sub, mul, sqrt, div and add took about ten kernels each way; under
// create_graph the backward is written with differentiable ops instead, so batch_norm
// stays differentiable to any order. Eval is composed of differentiable ops.
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "kernels/nn_kernels.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// A per-channel tensor [C] in a shape that broadcasts against [N, C, *].
Tensor per_channel(const Tensor& t, int64_t rank) {
  Shape s(rank, 1);
  s[1] = t.size(0);
  return reshape(t, s);
}

// The dtype of the per-channel tensors and statistics: the input's, or float32 beside a
// 16-bit input (mixed precision, as the reference framework allows).
DType channel_dtype(const Tensor& input, const Tensor& weight, const Tensor& running_mean) {
  const Tensor& t = weight.defined() ? weight : running_mean;
  if (is_reduced_floating(input.dtype()) && (!t.defined() || t.dtype() == DType::kFloat32)) {
    return DType::kFloat32;
  }
  return input.dtype();
}

void check_channel_tensor(const Tensor& t, const Tensor& input, DType want, const char* what) {
  if (!t.defined()) return;
  check_same_device(input, t, "batch_norm");
  SG_CHECK(t.dtype() == want, ValueError, "batch_norm: ", what, " ", t.describe(), " must be ",
           dtype_name(want), " beside input ", input.describe(), " (a float16 or bfloat16 input "
           "takes float32 parameters and statistics, or its own dtype for all)");
  SG_CHECK(t.sizes() == Shape{input.size(1)}, ValueError, "batch_norm: ", what, " ",
           t.describe(), " must be [", input.size(1), "], one per channel of ", input.describe());
}

// The dims batch_norm reduces over: all but the channels (dim 1).
std::vector<int64_t> reduced_dims(int64_t rank) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

// The input as [N, C, S] for the kernels.
Shape ncs(const Shape& sizes) {
  int64_t s = 1;
  for (size_t d = 2; d < sizes.size(); ++d) s *= sizes[d];
  return {sizes[0], sizes[1], s};
}

struct BatchNormBackward final : Node {
  std::string name() const override { return "BatchNormBackward"; }
  TensorList apply(TensorList&& grads) override {
    TensorList out(3);
    const Tensor& g = grads[0];
    if (!g.defined()) return out;
    // Saved as [N, C, S]; the differentiable path works in the input's own shape.
    const Tensor x = reshape(input.unpack("BatchNormBackward"), input_in.sizes);
    const Tensor w = has_weight ? weight.unpack("BatchNormBackward") : Tensor();
    if (grad_mode_enabled()) return differentiable(g, x, w);
    const Shape shape = ncs(x.sizes());
    const Tensor g3 = contiguous(reshape(g, shape));
    const Tensor x3 = reshape(x, shape);  // saved contiguous
    Tensor gin, gw, gb;
    if (needs_grad(*this, 0)) gin = new_output(shape, x.dtype(), x.device());
    // Parameter gradients in the statistics' dtype (float32 beside a 16-bit input).
    const DType pd = batch_mean.dtype();
    if (has_weight && needs_grad(*this, 1)) gw = new_output({shape[1]}, pd, x.device());
    if (has_bias && needs_grad(*this, 2)) gb = new_output({shape[1]}, pd, x.device());
    const kernels::View gin_v = gin.defined() ? gin.view() : kernels::View();
    const kernels::View gw_v = gw.defined() ? gw.view() : kernels::View();
    const kernels::View gb_v = gb.defined() ? gb.view() : kernels::View();
    const kernels::View w_v = w.defined() ? w.view() : kernels::View();
    kernels::batch_norm_backward(stream_of(g3), gin.defined() ? &gin_v : nullptr,
                                 gw.defined() ? &gw_v : nullptr, gb.defined() ? &gb_v : nullptr,
                                 g3.view(), x3.view(), batch_mean.view(), batch_var.view(),
                                 w.defined() ? &w_v : nullptr, eps);
    if (gin.defined()) out[0] = grad_for(reshape(gin, x.sizes()), input_in);
    if (gw.defined()) out[1] = grad_for(gw, weight_in);
    if (gb.defined()) out[2] = grad_for(gb, bias_in);
    return out;
  }
  // The same gradients from ops that record history (create_graph): the batch statistics
  // are recomputed from x so that their dependence on x is differentiated too.
  TensorList differentiable(const Tensor& g, const Tensor& x, const Tensor& w) const {
    TensorList out(3);
    const int64_t rank = x.dim();
    const std::vector<int64_t> dims = reduced_dims(rank);
    const double m = static_cast<double>(x.numel() / x.size(1));
    const Tensor centered = sub(x, mean_of(x, dims));
    const Tensor invstd = div(1.0, sqrt(add(mean_of(mul(centered, centered), dims), eps)));
    const Tensor xhat = mul(centered, invstd);
    const Tensor gxhat = w.defined() ? mul(g, per_channel(w, rank)) : g;
    if (needs_grad(*this, 0)) {
      const Tensor sum_g = sum(gxhat, dims, /*keepdim=*/true);
      const Tensor sum_gx = sum(mul(gxhat, xhat), dims, /*keepdim=*/true);
      const Tensor inner = sub(sub(mul(gxhat, m), sum_g), mul(xhat, sum_gx));
      out[0] = grad_for(mul(mul(invstd, 1.0 / m), inner), input_in);
    }
    if (has_weight && needs_grad(*this, 1)) out[1] = grad_for(sum(mul(g, xhat), dims), weight_in);
    if (has_bias && needs_grad(*this, 2)) out[2] = grad_for(sum(g, dims), bias_in);
    return out;
  }
  static Tensor mean_of(const Tensor& t, const std::vector<int64_t>& dims) {
    return streamgrad::mean(t, dims, /*keepdim=*/true);
  }
  void release_variables() override {
    input.reset();
    weight.reset();
  }
  SavedTensor input, weight;
  Tensor batch_mean, batch_var;  // [C], without history
  InputInfo input_in, weight_in, bias_in;
  bool has_weight = false, has_bias = false;
  double eps = 0;
};

// Training: one kernel for the statistics and the normalisation, one node.
Tensor fused_training(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Tensor& running_mean, const Tensor& running_var, double momentum,
                      double eps) {
  const Shape shape = ncs(input.sizes());
  const Tensor x3 = contiguous(reshape(input, shape));
  const int64_t channels = shape[1];
  Tensor out = new_output(shape, input.dtype(), input.device());
  const DType stats = channel_dtype(input, weight, running_mean);
  Tensor batch_mean = new_output({channels}, stats, input.device());
  Tensor batch_var = new_output({channels}, stats, input.device());
  const kernels::View w_v = weight.defined() ? weight.view() : kernels::View();
  const kernels::View b_v = bias.defined() ? bias.view() : kernels::View();
  // The running statistics move in the same launch (in place, written through contiguous
  // copies where the buffers are not).
  Tensor rm, rv;
  kernels::RunningStats running;
  if (running_mean.defined()) {
    NoGradGuard no_grad;
    rm = contiguous(running_mean);
    rv = contiguous(running_var);
    running = kernels::RunningStats{rm.view(), rv.view(), momentum};
  }
  kernels::batch_norm_forward(stream_of(out), out.view(), batch_mean.view(), batch_var.view(),
                              x3.view(), weight.defined() ? &w_v : nullptr,
                              bias.defined() ? &b_v : nullptr, eps,
                              running_mean.defined() ? &running : nullptr);
  if (running_mean.defined()) {
    NoGradGuard no_grad;
    for (auto [buffer, moved] : {std::pair<Tensor, Tensor>{running_mean, rm}, {running_var, rv}}) {
      if (moved.is_same(buffer)) {
        buffer.bump_version();
      } else {
        copy_(buffer, moved);
      }
    }
  }
  out = reshape(out, input.sizes());
  if (any_requires_grad({input, weight, bias})) {
    auto node = std::make_shared<BatchNormBackward>();
    node->input = SavedTensor(x3);
    node->input_in = meta_of(input);
    node->has_weight = weight.defined();
    node->has_bias = bias.defined();
    if (weight.defined()) {
      node->weight = SavedTensor(weight);
      node->weight_in = meta_of(weight);
    }
    if (bias.defined()) node->bias_in = meta_of(bias);
    node->batch_mean = batch_mean;
    node->batch_var = batch_var;
    node->eps = eps;
    wire(node, {input, weight, bias}, {out});
  }
  return out;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps) {
  check_defined(input, "batch_norm", "the input");
  check_floating(input, "batch_norm");
  SG_CHECK(input.dim() >= 2, ValueError, "batch_norm: expected a [N, C] or [N, C, *] input, got ",
           input.describe());
  const DType params = channel_dtype(input, weight, running_mean);
  check_channel_tensor(weight, input, params, "weight");
  check_channel_tensor(bias, input, params, "bias");
  check_channel_tensor(running_mean, input, params, "running_mean");
  check_channel_tensor(running_var, input, params, "running_var");
  SG_CHECK(running_mean.defined() == running_var.defined(), ValueError,
           "batch_norm: running_mean and running_var must be given together");
  SG_CHECK(training || running_mean.defined(), ValueError,
           "batch_norm: eval mode needs running_mean and running_var");
  SG_CHECK(eps >= 0 && momentum >= 0 && momentum <= 1, ValueError, "batch_norm: eps ", eps,
           " must be >= 0 and momentum ", momentum, " in [0, 1]");
  const int64_t rank = input.dim();
  const int64_t count = input.numel() / input.size(1);
  if (training) {
    SG_CHECK(count > 1, ValueError, "batch_norm: training needs more than one value per channel, ",
             "got input ", input.describe());
    return fused_training(input, weight, bias, running_mean, running_var, momentum, eps);
  }
  const Tensor centered = sub(input, per_channel(running_mean, rank));
  const Tensor var = per_channel(running_var, rank);
  Tensor out = div(centered, sqrt(add(var, eps)));
  if (weight.defined()) out = mul(out, per_channel(weight, rank));
  if (bias.defined()) out = add(out, per_channel(bias, rank));
  // float32 statistics promote a 16-bit input's arithmetic; the result has its dtype.
  return out.dtype() == input.dtype() ? out : to(out, input.dtype());
}

}  // namespace streamgrad

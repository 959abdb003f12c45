// layer_norm and rms_norm, as the reference framework's torch.nn.functional ones: each
// normalises over the trailing dims named by normalized_shape, the input seen as [M, N]
// rows (N the product of normalized_shape).
//
// One fused kernel forward and one backward (kernels/nn_kernels.h) where the composition
// of mean, sub, mul, sqrt, div and add took about ten kernels each way. The forward saves
// the input and the rows' mean and rstd (float32 beside a 16-bit input, the reference's
// accumulate type; RMS: rstd only); under create_graph the backward is written with
// differentiable ops instead, recomputing the statistics from the input so that their
// dependence on it is differentiated too: both ops are differentiable to any order.
#include <cfloat>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grad_mode.h"
#include "kernels/nn_kernels.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

std::string shape_str(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

// What both ops derive from their arguments once checked.
struct RowNorm {
  const char* op;
  bool rms;
  int64_t m, n;
  DType stats;  // of mean and rstd
};

// A weight or bias: normalized_shape's shape, the input's device, and the input's dtype
// or float32 beside a 16-bit input (mixed precision, as the reference's cpu kernels take).
void check_param(const RowNorm& r, const Tensor& p, const char* what, const Tensor& input,
                 const Shape& normalized) {
  if (!p.defined()) return;
  check_same_device(input, p, r.op);
  SG_CHECK(p.sizes() == normalized, ValueError, r.op, ": ", what, " ", p.describe(),
           " must have the shape of normalized_shape ", shape_str(normalized),
           " (one value per normalised element)");
  const bool mixed = is_reduced_floating(input.dtype()) && p.dtype() == DType::kFloat32;
  SG_CHECK(p.dtype() == input.dtype() || mixed, ValueError, r.op, ": ", what, " ",
           p.describe(), " must be ", dtype_name(input.dtype()), " like input ",
           input.describe(), " (a float16 or bfloat16 input also takes float32 parameters); "
           "convert it with to()");
}

RowNorm check_row_norm(const char* op, bool rms, const Tensor& input, const Shape& normalized,
                       const Tensor& weight, const Tensor& bias) {
  check_defined(input, op, "the input");
  check_floating(input, op);
  const int64_t k = static_cast<int64_t>(normalized.size());
  SG_CHECK(k >= 1, ValueError, op, ": normalized_shape must name at least one dim (the "
           "trailing dims to normalise over), got []");
  const Shape& sizes = input.sizes();
  const bool trailing = input.dim() >= k && Shape(sizes.end() - k, sizes.end()) == normalized;
  SG_CHECK(trailing, ValueError, op, ": normalized_shape ", shape_str(normalized),
           " must equal the input's last ", k, " dim(s), i.e. an input of shape [*, ",
           absl::StrJoin(normalized, ", "), "]; got input ", input.describe(),
           ". Pass the input's trailing sizes (e.g. {", sizes.empty() ? 1 : sizes.back(),
           "} to normalise over the last dim)");
  RowNorm r{op, rms, 1, numel_of(normalized),
            is_reduced_floating(input.dtype()) ? DType::kFloat32 : input.dtype()};
  for (int64_t d = 0; d < input.dim() - k; ++d) r.m *= sizes[d];
  check_param(r, weight, "weight", input, normalized);
  check_param(r, bias, "bias", input, normalized);
  SG_CHECK(!weight.defined() || !bias.defined() || weight.dtype() == bias.dtype(), ValueError,
           op, ": weight ", weight.describe(), " and bias ", bias.describe(),
           " must share one dtype");
  return r;
}

kernels::View view_or_empty(const Tensor& t) { return t.defined() ? t.view() : kernels::View(); }
const kernels::View* ptr_if(const Tensor& t, const kernels::View& v) {
  return t.defined() ? &v : nullptr;
}

// A parameter as the kernels' contiguous [N].
Tensor as_vector(const Tensor& p, int64_t n) {
  return p.defined() ? contiguous(reshape(p, {n})) : Tensor();
}

struct RowNormBackward final : Node {
  std::string name() const override { return rms ? "RmsNormBackward" : "LayerNormBackward"; }
  TensorList apply(TensorList&& grads) override {
    TensorList out(3);
    const Tensor& g = grads[0];
    if (!g.defined()) return out;
    const Tensor x = input.unpack(name().c_str());  // [M, N], contiguous
    const Tensor w = has_weight ? weight.unpack(name().c_str()) : Tensor();
    if (grad_mode_enabled()) return differentiable(reshape(g, x.sizes()), x, w);
    const Tensor g2 = contiguous(reshape(g, x.sizes()));
    const int64_t n = x.size(1);
    Tensor gin, gw, gb;
    if (needs_grad(*this, 0)) gin = new_output(x.sizes(), x.dtype(), x.device());
    if (has_weight && needs_grad(*this, 1)) gw = new_output({n}, w.dtype(), x.device());
    if (has_bias && needs_grad(*this, 2)) gb = new_output({n}, bias_in.dtype, x.device());
    const Tensor w1 = as_vector(w, n);
    const kernels::View gin_v = view_or_empty(gin), gw_v = view_or_empty(gw),
                        gb_v = view_or_empty(gb), w_v = view_or_empty(w1);
    if (rms) {
      kernels::rms_norm_backward(stream_of(g2), ptr_if(gin, gin_v), ptr_if(gw, gw_v), g2.view(),
                                 x.view(), rstd.view(), ptr_if(w1, w_v));
    } else {
      kernels::layer_norm_backward(stream_of(g2), ptr_if(gin, gin_v), ptr_if(gw, gw_v),
                                   ptr_if(gb, gb_v), g2.view(), x.view(), mean.view(),
                                   rstd.view(), ptr_if(w1, w_v));
    }
    if (gin.defined()) out[0] = grad_for(reshape(gin, input_in.sizes), input_in);
    if (gw.defined()) out[1] = grad_for(reshape(gw, weight_in.sizes), weight_in);
    if (gb.defined()) out[2] = grad_for(reshape(gb, bias_in.sizes), bias_in);
    return out;
  }
  // The same gradients from ops that record history (create_graph), in float32 for a
  // 16-bit input as the kernels compute them; grad_for converts back.
  TensorList differentiable(const Tensor& g, const Tensor& x, const Tensor& w) const {
    TensorList out(3);
    const DType dt = is_reduced_floating(x.dtype()) ? DType::kFloat32 : x.dtype();
    auto as_dt = [dt](const Tensor& t) { return t.defined() && t.dtype() != dt ? to(t, dt) : t; };
    const Tensor xf = as_dt(x), gf = as_dt(g);
    const Tensor wf = w.defined() ? reshape(as_dt(w), {x.size(1)}) : Tensor();
    const std::vector<int64_t> row{1};
    const Tensor centred = rms ? xf : sub(xf, streamgrad::mean(xf, row, /*keepdim=*/true));
    const Tensor r = rsqrt(add(streamgrad::mean(mul(centred, centred), row, true), eps));
    const Tensor xhat = mul(centred, r);
    if (needs_grad(*this, 0)) {
      const Tensor gx = wf.defined() ? mul(gf, wf) : gf;
      const Tensor proj = mul(xhat, streamgrad::mean(mul(gx, xhat), row, true));
      const Tensor centred_g = rms ? gx : sub(gx, streamgrad::mean(gx, row, true));
      out[0] = grad_for(reshape(mul(r, sub(centred_g, proj)), input_in.sizes), input_in);
    }
    if (has_weight && needs_grad(*this, 1)) {
      out[1] = grad_for(reshape(sum(mul(gf, xhat), {0}), weight_in.sizes), weight_in);
    }
    if (has_bias && needs_grad(*this, 2)) {
      out[2] = grad_for(reshape(sum(gf, {0}), bias_in.sizes), bias_in);
    }
    return out;
  }
  void release_variables() override {
    input.reset();
    weight.reset();
  }
  SavedTensor input, weight;
  Tensor mean, rstd;  // [M], without history (mean undefined for RMS)
  InputInfo input_in, weight_in, bias_in;
  bool rms = false, has_weight = false, has_bias = false;
  double eps = 0;
};

Tensor row_norm(const RowNorm& r, const Tensor& input, const Tensor& weight, const Tensor& bias,
                double eps) {
  const Tensor x2 = contiguous(reshape(input, {r.m, r.n}));
  Tensor out = new_output({r.m, r.n}, input.dtype(), input.device());
  const Tensor mean = r.rms ? Tensor() : new_output({r.m}, r.stats, input.device());
  const Tensor rstd = new_output({r.m}, r.stats, input.device());
  const Tensor w1 = as_vector(weight, r.n), b1 = as_vector(bias, r.n);
  const kernels::View w_v = view_or_empty(w1), b_v = view_or_empty(b1);
  if (r.rms) {
    kernels::rms_norm_forward(stream_of(out), out.view(), rstd.view(), x2.view(), ptr_if(w1, w_v),
                              eps);
  } else {
    kernels::layer_norm_forward(stream_of(out), out.view(), mean.view(), rstd.view(), x2.view(),
                                ptr_if(w1, w_v), ptr_if(b1, b_v), eps);
  }
  out = reshape(out, input.sizes());
  if (any_requires_grad({input, weight, bias})) {
    auto node = std::make_shared<RowNormBackward>();
    node->input = SavedTensor(x2);
    node->input_in = meta_of(input);
    node->rms = r.rms;
    node->has_weight = weight.defined();
    node->has_bias = bias.defined();
    if (weight.defined()) {
      node->weight = SavedTensor(weight);
      node->weight_in = meta_of(weight);
    }
    if (bias.defined()) node->bias_in = meta_of(bias);
    node->mean = mean;
    node->rstd = rstd;
    node->eps = eps;
    wire(node, {input, weight, bias}, {out});
  }
  return out;
}

}  // namespace

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  SG_AUTOCAST(kFloat32, layer_norm, input, normalized_shape, weight, bias, eps);
  const RowNorm r = check_row_norm("layer_norm", false, input, normalized_shape, weight, bias);
  return row_norm(r, input, weight, bias, eps);
}

Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  SG_AUTOCAST(kFloat32, rms_norm, input, normalized_shape, weight, eps);
  const RowNorm r = check_row_norm("rms_norm", true, input, normalized_shape, weight, Tensor());
  // The reference's default: the machine epsilon of the type it computes in (float32 for
  // float16, bfloat16 and float32 inputs).
  const double e = eps.has_value() ? *eps : r.stats == DType::kFloat64 ? DBL_EPSILON : FLT_EPSILON;
  return row_norm(r, input, weight, Tensor(), e);
}

}  // namespace streamgrad

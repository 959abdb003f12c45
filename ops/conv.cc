// unfold / fold (im2col / col2im), conv2d built on them, and conv2d's gradients as
// functions (conv2d_input_grad, conv2d_weight_grad).
//
// unfold's backward is fold and fold's is unfold, so conv2d — unfold, one matmul per
// group, a bias add — is differentiable to any order without a hand-written backward.
// The matmul is batched over N with the weight broadcast; its backward sums the weight
// gradient over the batch.
// Where the device's convolution library takes the input (kernels/nn_kernels.h: cuDNN on
// cuda, float32 and float64; oneDNN on cpu and sim, float32, unless set_onednn_enabled
// (false); on both, float16 and bfloat16 through float32 copies) conv2d runs the library's
// kernels instead, with one node
// (CudnnConvolutionBackward or MkldnnConvolutionBackward, the reference's names) that
// saves only the input and the weight: the library's backward kernels, or, when the
// backward itself is recorded (create_graph), conv2d_input_grad and conv2d_weight_grad,
// which are the composed path's gradients written out, so the result stays
// differentiable to any order.
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

std::string pair_str(std::array<int64_t, 2> v) { return absl::StrCat("(", v[0], ", ", v[1], ")"); }

kernels::Window2d window_of(const char* op, std::array<int64_t, 2> kernel,
                            const Conv2dParams& p) {
  for (int d = 0; d < 2; ++d) {
    SG_CHECK(kernel[d] > 0 && p.stride[d] > 0 && p.dilation[d] > 0 && p.padding[d] >= 0,
             ValueError, op, ": kernel_size ", pair_str(kernel), ", stride ", pair_str(p.stride),
             " and dilation ", pair_str(p.dilation), " must be positive and padding ",
             pair_str(p.padding), " non-negative");
  }
  kernels::Window2d w;
  for (int d = 0; d < 2; ++d) {
    w.kernel[d] = kernel[d];
    w.stride[d] = p.stride[d];
    w.padding[d] = p.padding[d];
    w.dilation[d] = p.dilation[d];
  }
  return w;
}

// The output positions of window `w` over [h, w]; a ValueError when the window does not
// fit the padded input.
std::array<int64_t, 2> positions(const char* op, const Tensor& input, int64_t h, int64_t wd,
                                 const kernels::Window2d& w) {
  const int64_t oh = kernels::window_output_size(h, w.kernel[0], w.stride[0], w.padding[0], w.dilation[0]);
  const int64_t ow = kernels::window_output_size(wd, w.kernel[1], w.stride[1], w.padding[1], w.dilation[1]);
  SG_CHECK(oh > 0 && ow > 0, ValueError, op, ": a ", w.kernel[0], "x", w.kernel[1],
           " window with dilation (", w.dilation[0], ", ", w.dilation[1], ") does not fit input ",
           input.describe(), " padded by (", w.padding[0], ", ", w.padding[1],
           "); the output would be ", oh, "x", ow);
  return {oh, ow};
}

// The data of `t` in contiguous layout, without recording (the caller wires its own node
// to `t`).
Tensor contiguous_data(const Tensor& t) {
  if (t.is_contiguous()) return t;
  NoGradGuard no_grad;
  return contiguous(t);
}

struct UnfoldBackward final : Node {
  std::string name() const override { return "UnfoldBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {fold(grads[0], output_size, kernel_size, params)};
  }
  std::array<int64_t, 2> output_size{}, kernel_size{};
  Conv2dParams params;
};

struct FoldBackward final : Node {
  std::string name() const override { return "FoldBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {unfold(grads[0], kernel_size, params)};
  }
  std::array<int64_t, 2> kernel_size{};
  Conv2dParams params;
};

// product(g) for each of `groups` groups, concatenated along `dim`.
template <typename Fn>
Tensor concat_groups(int64_t groups, int64_t dim, Fn product) {
  if (groups == 1) return product(0);
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < groups; ++g) parts.push_back(product(g));
  return cat(parts, dim);
}

struct LibraryConvolutionBackward final : Node {
  std::string name() const override {
    return cuda ? "CudnnConvolutionBackward" : "MkldnnConvolutionBackward";
  }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor()};
    const Tensor x = input.unpack(name().c_str());
    const Tensor wt = weight.unpack(name().c_str());
    Tensor gx, gw;
    if (grad_mode_enabled()) {
      if (needs_grad(*this, 0)) gx = conv2d_input_grad(x.sizes(), wt, g, params);
      if (needs_grad(*this, 1)) gw = conv2d_weight_grad(x, wt.sizes(), g, params);
      return {gx, gw};
    }
    const Tensor gc = contiguous(g);
    if (needs_grad(*this, 0) && needs_grad(*this, 1)) {
      gx = new_output(x.sizes(), x.dtype(), x.device());
      gw = new_output(wt.sizes(), wt.dtype(), wt.device());
      kernels::library_conv2d_backward(stream_of(gx), gx.view(), gw.view(), gc.view(),
                                       contiguous(x).view(), contiguous(wt).view(), window,
                                       params.groups);
      return {gx, gw};
    }
    if (needs_grad(*this, 0)) {
      gx = new_output(x.sizes(), x.dtype(), x.device());
      kernels::library_conv2d_backward_input(stream_of(gx), gx.view(), gc.view(),
                                             contiguous(wt).view(), window, params.groups);
    }
    if (needs_grad(*this, 1)) {
      gw = new_output(wt.sizes(), wt.dtype(), wt.device());
      kernels::library_conv2d_backward_weight(stream_of(gw), gw.view(), gc.view(),
                                              contiguous(x).view(), window, params.groups);
    }
    return {gx, gw};
  }
  void release_variables() override {
    input.reset();
    weight.reset();
  }
  // As the user passed them (not contiguous copies): under create_graph the gradients
  // are functions of these, and a copy made without history would cut the second order.
  SavedTensor input, weight;
  Conv2dParams params;
  kernels::Window2d window;
  bool cuda = false;
};

// conv2d through the device's library, without the bias; inputs checked by conv2d.
Tensor library_conv2d(const Tensor& input, const Tensor& weight, const kernels::Window2d& w,
                    const Conv2dParams& p, std::array<int64_t, 2> o) {
  const Tensor x = contiguous_data(input), wt = contiguous_data(weight);
  Tensor out = new_output({input.size(0), weight.size(0), o[0], o[1]}, input.dtype(),
                          input.device());
  kernels::library_conv2d(stream_of(out), out.view(), x.view(), wt.view(), w, p.groups);
  if (any_requires_grad({input, weight})) {
    auto node = std::make_shared<LibraryConvolutionBackward>();
    node->cuda = input.device().type() == DeviceType::kCuda;
    node->input = SavedTensor(input);
    node->weight = SavedTensor(weight);
    node->params = p;
    node->window = w;
    wire(node, {input, weight}, {out});
  }
  return out;
}

void check_image(const char* op, const Tensor& input) {
  check_defined(input, op, "the input");
  check_floating(input, op);
  SG_CHECK(input.dim() == 3 || input.dim() == 4, ValueError, op,
           ": expected a [N, C, H, W] or [C, H, W] input, got ", input.describe());
}

}  // namespace

Tensor unfold(const Tensor& input, std::array<int64_t, 2> kernel_size, const Conv2dParams& p) {
  check_image("unfold", input);
  const kernels::Window2d w = window_of("unfold", kernel_size, p);
  const int64_t h = input.size(-2), wd = input.size(-1);
  const std::array<int64_t, 2> o = positions("unfold", input, h, wd, w);
  // Unbatched: checked above as the caller passed it, so that errors show that shape.
  if (input.dim() == 3) return squeeze(unfold(unsqueeze(input, 0), kernel_size, p), 0);
  const int64_t n = input.size(0), c = input.size(1);
  Tensor out = new_output({n, c * kernel_size[0] * kernel_size[1], o[0] * o[1]}, input.dtype(),
                          input.device());
  kernels::im2col(stream_of(out), out.view(), contiguous_data(input).view(), w);
  if (any_requires_grad({input})) {
    auto node = std::make_shared<UnfoldBackward>();
    node->output_size = {h, wd};
    node->kernel_size = kernel_size;
    node->params = p;
    wire(node, {input}, {out});
  }
  return out;
}

Tensor fold(const Tensor& input, std::array<int64_t, 2> output_size,
            std::array<int64_t, 2> kernel_size, const Conv2dParams& p) {
  check_defined(input, "fold", "the input");
  check_floating(input, "fold");
  SG_CHECK(input.dim() == 2 || input.dim() == 3, ValueError,
           "fold: expected a [N, C * kH * kW, L] or [C * kH * kW, L] input, got ", input.describe());
  const kernels::Window2d w = window_of("fold", kernel_size, p);
  const int64_t taps = kernel_size[0] * kernel_size[1];
  SG_CHECK(output_size[0] > 0 && output_size[1] > 0, ValueError, "fold: output_size ",
           pair_str(output_size), " must be positive");
  const std::array<int64_t, 2> o = positions("fold", input, output_size[0], output_size[1], w);
  SG_CHECK(input.size(-2) % taps == 0 && input.size(-1) == o[0] * o[1], ValueError,
           "fold: input ", input.describe(), " does not match a ", pair_str(kernel_size),
           " window over ", pair_str(output_size), ": its dim ", input.dim() - 2,
           " must be a multiple of ", taps, " and its last dim must be ", o[0] * o[1]);
  // Unbatched: checked above as the caller passed it, so that errors show that shape.
  if (input.dim() == 2) return squeeze(fold(unsqueeze(input, 0), output_size, kernel_size, p), 0);
  Tensor out = zeros({input.size(0), input.size(1) / taps, output_size[0], output_size[1]},
                     TensorOptions().dtype(input.dtype()).device(input.device()));
  kernels::col2im(stream_of(out), out.view(), contiguous_data(input).view(), w);
  if (any_requires_grad({input})) {
    auto node = std::make_shared<FoldBackward>();
    node->kernel_size = kernel_size;
    node->params = p;
    wire(node, {input}, {out});
  }
  return out;
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const Conv2dParams& p) {
  SG_AUTOCAST(kLowerPrecision, conv2d, input, weight, bias, p);
  check_image("conv2d", input);
  check_defined(weight, "conv2d", "the weight");
  check_same_device(input, weight, "conv2d");
  check_same_dtype(input, weight, "conv2d");
  SG_CHECK(weight.dim() == 4, ValueError, "conv2d: expected a [O, C / groups, kH, kW] weight, got ",
           weight.describe());
  const int64_t groups = p.groups, out_ch = weight.size(0), in_ch = input.size(-3);
  SG_CHECK(groups > 0 && out_ch % groups == 0 && in_ch == weight.size(1) * groups, ValueError,
           "conv2d: input ", input.describe(), " has ", in_ch, " channels, weight ",
           weight.describe(), " expects ", weight.size(1), " x groups ", groups,
           "; groups must divide the output channels ", out_ch);
  if (bias.defined()) {
    check_same_device(input, bias, "conv2d");
    check_same_dtype(input, bias, "conv2d");
    SG_CHECK(bias.sizes() == Shape{out_ch}, ValueError, "conv2d: bias ", bias.describe(),
             " must be [", out_ch, "], one per output channel");
  }
  const std::array<int64_t, 2> k{weight.size(2), weight.size(3)};
  const kernels::Window2d w = window_of("conv2d", k, p);
  const std::array<int64_t, 2> o = positions("conv2d", input, input.size(-2), input.size(-1), w);
  // Unbatched: checked above as the caller passed it, so that errors show that shape.
  if (input.dim() == 3) return squeeze(conv2d(unsqueeze(input, 0), weight, bias, p), 0);
  if (kernels::library_conv2d_supported(input.device(), input.dtype(), input.sizes(),
                                        weight.sizes(), w, groups)) {
    const Tensor out = library_conv2d(input, weight, w, p, o);
    return bias.defined() ? add(out, reshape(bias, {out_ch, 1, 1})) : out;
  }
  const Tensor cols = unfold(input, k, p);  // [N, C * kH * kW, L]
  const int64_t rows = weight.size(1) * k[0] * k[1];
  const Tensor w2 = reshape(weight, {out_ch, rows});
  const int64_t per_group = out_ch / groups;
  Tensor out = concat_groups(groups, 1, [&](int64_t g) {
    return groups == 1 ? matmul(w2, cols)
                       : matmul(narrow(w2, 0, g * per_group, per_group),
                                narrow(cols, 1, g * rows, rows));
  });
  if (bias.defined()) out = add(out, reshape(bias, {out_ch, 1}));
  return reshape(out, {input.size(0), out_ch, o[0], o[1]});
}

namespace {

// Checks one of conv2d's gradient functions' arguments: the [N, O, oH, oW] gradient
// against the input and weight sizes it names; returns the window.
kernels::Window2d check_grad_args(const char* op, const Shape& input_size,
                                  const Shape& weight_size, const Tensor& grad_output,
                                  const Tensor& other, const Conv2dParams& p) {
  check_defined(grad_output, op, "grad_output");
  check_floating(grad_output, op);
  check_same_device(grad_output, other, op);
  check_same_dtype(grad_output, other, op);
  SG_CHECK(input_size.size() == 4 && weight_size.size() == 4 && grad_output.dim() == 4,
           ValueError, op, ": expected a 4-d input size, weight and grad_output, got input size [",
           absl::StrJoin(input_size, ", "), "], weight [", absl::StrJoin(weight_size, ", "),
           "] and grad_output ", grad_output.describe());
  const int64_t groups = p.groups;
  SG_CHECK(groups > 0 && weight_size[0] % groups == 0 &&
               input_size[1] == weight_size[1] * groups,
           ValueError, op, ": input size [", absl::StrJoin(input_size, ", "), "] and weight [",
           absl::StrJoin(weight_size, ", "), "] do not match ", groups, " groups");
  const kernels::Window2d w = window_of(op, {weight_size[2], weight_size[3]}, p);
  const std::array<int64_t, 2> o = positions(op, grad_output, input_size[2], input_size[3], w);
  SG_CHECK(grad_output.sizes() == Shape({input_size[0], weight_size[0], o[0], o[1]}),
           ValueError, op, ": grad_output ", grad_output.describe(), " is not conv2d's output "
           "for input size [", absl::StrJoin(input_size, ", "), "] and weight [",
           absl::StrJoin(weight_size, ", "), "]; expected [", input_size[0], ", ",
           weight_size[0], ", ", o[0], ", ", o[1], "]");
  return w;
}

}  // namespace

Tensor conv2d_input_grad(const Shape& input_size, const Tensor& weight,
                         const Tensor& grad_output, const Conv2dParams& p) {
  check_defined(weight, "conv2d_input_grad", "the weight");
  check_grad_args("conv2d_input_grad", input_size, weight.sizes(), grad_output, weight, p);
  const int64_t out_ch = weight.size(0), per_group = out_ch / p.groups;
  const std::array<int64_t, 2> k{weight.size(2), weight.size(3)};
  const Tensor g3 = reshape(grad_output, {input_size[0], out_ch, -1});  // [N, O, L]
  const Tensor w2 = reshape(weight, {out_ch, -1});                      // [O, rows]
  // [N, C * kH * kW, L]: each group's weight rows transposed onto its gradient rows.
  const Tensor cols = concat_groups(p.groups, 1, [&](int64_t g) {
    return matmul(transpose(narrow(w2, 0, g * per_group, per_group), 0, 1),
                  narrow(g3, 1, g * per_group, per_group));
  });
  return fold(cols, {input_size[2], input_size[3]}, k, p);
}

Tensor conv2d_weight_grad(const Tensor& input, const Shape& weight_size,
                          const Tensor& grad_output, const Conv2dParams& p) {
  check_image("conv2d_weight_grad", input);
  check_grad_args("conv2d_weight_grad", input.sizes(), weight_size, grad_output, input, p);
  const int64_t out_ch = weight_size[0], per_group = out_ch / p.groups;
  const int64_t rows = weight_size[1] * weight_size[2] * weight_size[3];
  const Tensor cols = unfold(input, {weight_size[2], weight_size[3]}, p);  // [N, C*kk, L]
  const Tensor g3 = reshape(grad_output, {input.size(0), out_ch, -1});    // [N, O, L]
  // [O, rows]: each group's gradient rows against its columns, summed over the batch.
  const Tensor w2 = concat_groups(p.groups, 0, [&](int64_t g) {
    return sum(matmul(narrow(g3, 1, g * per_group, per_group),
                      transpose(narrow(cols, 1, g * rows, rows), 1, 2)),
               {0});
  });
  return reshape(w2, weight_size);
}

}  // namespace streamgrad

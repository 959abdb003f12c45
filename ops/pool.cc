// max_pool2d and avg_pool2d.
//
// Max pooling is one kernel each way: the forward writes the values and their arg-max
// positions, the backward adds the gradient at those positions. Under create_graph the
// backward is scatter_add to the positions instead, whose own backward (gather) makes it
// differentiable again. Average pooling is the mean of unfold's columns (zero
// padding counted), or their sum over each window's divisor where windows differ: the
// taps inside the input (count_include_pad false), or those inside the padded input
// (ceil_mode's last windows, which may reach past it).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "kernels/nn_kernels.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// The window of pooling `p` after PyTorch's checks; stride {0, 0} means the kernel size.
kernels::Window2d pool_window(const char* op, const Tensor& input, const Pool2dParams& p) {
  check_defined(input, op, "the input");
  check_floating(input, op);
  SG_CHECK(input.dim() == 3 || input.dim() == 4, ValueError, op,
           ": expected a [N, C, H, W] or [C, H, W] input, got ", input.describe());
  kernels::Window2d w;
  const bool default_stride = p.stride[0] == 0 && p.stride[1] == 0;
  for (int d = 0; d < 2; ++d) {
    w.kernel[d] = p.kernel_size[d];
    w.stride[d] = default_stride ? p.kernel_size[d] : p.stride[d];
    w.padding[d] = p.padding[d];
    w.dilation[d] = p.dilation[d];
    SG_CHECK(w.kernel[d] > 0 && w.stride[d] > 0 && w.dilation[d] > 0, ValueError, op,
             ": kernel_size (", p.kernel_size[0], ", ", p.kernel_size[1], "), stride (",
             w.stride[0], ", ", w.stride[1], ") and dilation (", p.dilation[0], ", ",
             p.dilation[1], ") must be positive");
    SG_CHECK(w.padding[d] >= 0 && w.padding[d] <= w.kernel[d] / 2, ValueError, op, ": padding (",
             p.padding[0], ", ", p.padding[1], ") must be between 0 and half the kernel size (",
             p.kernel_size[0], ", ", p.kernel_size[1], ")");
  }
  return w;
}

std::array<int64_t, 2> pool_positions(const char* op, const Tensor& input,
                                      const kernels::Window2d& w, bool ceil_mode) {
  const int64_t h = input.size(-2), wd = input.size(-1);
  const int64_t oh = kernels::window_output_size(h, w.kernel[0], w.stride[0], w.padding[0], w.dilation[0], ceil_mode);
  const int64_t ow = kernels::window_output_size(wd, w.kernel[1], w.stride[1], w.padding[1], w.dilation[1], ceil_mode);
  SG_CHECK(oh > 0 && ow > 0, ValueError, op, ": a ", w.kernel[0], "x", w.kernel[1],
           " window does not fit input ", input.describe(), " (output would be ", oh, "x", ow, ")");
  return {oh, ow};
}

// Gradients of max pooling over planes [P, H, W] reshaped from the input.
struct MaxPool2dBackward final : Node {
  std::string name() const override { return "MaxPool2dBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor idx = indices.unpack("MaxPool2dBackward");  // [P, oH, oW]
    const int64_t planes = idx.size(0), area = height * width;
    if (grad_mode_enabled()) {
      const int64_t per_plane = idx.size(1) * idx.size(2);
      const Tensor zero = zeros({planes, area}, TensorOptions().dtype(g.dtype()).device(g.device()));
      const Tensor gin = scatter_add(zero, 1, reshape(idx, {planes, per_plane}),
                                     reshape(g, {planes, per_plane}));
      return {grad_for(reshape(gin, input.sizes), input)};
    }
    const Tensor g3 = contiguous(reshape(g, idx.sizes()));
    Tensor gin = new_output({planes, height, width}, g.dtype(), g.device());
    kernels::max_pool2d_backward(stream_of(gin), gin.view(), g3.view(), idx.view(), window);
    return {grad_for(reshape(gin, input.sizes), input)};
  }
  void release_variables() override { indices.reset(); }
  SavedTensor indices;
  InputInfo input;
  int64_t height = 0, width = 0;
  kernels::Window2d window;
};

// How many taps each of the `out` windows along dim d of an input of extent `in` averages,
// as the reference: the window clipped to the padded input (the padding counts, what
// ceil_mode adds past it does not), or to the input alone without count_include_pad.
std::vector<int64_t> window_extents(int64_t in, int64_t out, const kernels::Window2d& w, int d,
                                    bool count_include_pad) {
  std::vector<int64_t> extents;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * w.stride[d] - w.padding[d];
    int64_t end = std::min(start + w.kernel[d], in + w.padding[d]);
    if (!count_include_pad) {
      start = std::max<int64_t>(start, 0);
      end = std::min(end, in);
    }
    extents.push_back(end - start);
  }
  return extents;
}

Conv2dParams as_conv(const kernels::Window2d& w) {
  Conv2dParams c;
  for (int d = 0; d < 2; ++d) {
    c.stride[d] = w.stride[d];
    c.padding[d] = w.padding[d];
    c.dilation[d] = w.dilation[d];
  }
  return c;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Pool2dParams& p) {
  const kernels::Window2d w = pool_window("max_pool2d", input, p);
  const std::array<int64_t, 2> o = pool_positions("max_pool2d", input, w, p.ceil_mode);
  const int64_t h = input.size(-2), wd = input.size(-1);
  const int64_t planes = input.numel() / (h * wd);
  Shape out_shape = input.sizes();
  out_shape[out_shape.size() - 2] = o[0];
  out_shape[out_shape.size() - 1] = o[1];
  Tensor indices = new_output({planes, o[0], o[1]}, DType::kInt64, input.device());
  Tensor values = new_output(out_shape, input.dtype(), input.device());
  {
    NoGradGuard no_grad;
    const Tensor x = reshape(contiguous(input), {planes, h, wd});
    kernels::max_pool2d(stream_of(values), contiguous_view_as(values, {planes, o[0], o[1]}),
                        indices.view(), x.view(), w);
  }
  if (any_requires_grad({input})) {
    auto node = std::make_shared<MaxPool2dBackward>();
    node->indices = SavedTensor(indices);
    node->input = meta_of(input);
    node->height = h;
    node->width = wd;
    node->window = w;
    wire(node, {input}, {values});
  }
  return {values, reshape(indices, out_shape)};
}

Tensor max_pool2d(const Tensor& input, const Pool2dParams& params) {
  return max_pool2d_with_indices(input, params).first;
}

Tensor avg_pool2d(const Tensor& input, const Pool2dParams& p) {
  const kernels::Window2d w = pool_window("avg_pool2d", input, p);
  SG_CHECK(p.dilation[0] == 1 && p.dilation[1] == 1, ValueError,
           "avg_pool2d: dilation is not an argument of average pooling; leave it (1, 1)");
  const std::array<int64_t, 2> o = pool_positions("avg_pool2d", input, w, p.ceil_mode);
  const int64_t h = input.size(-2), wd = input.size(-1);
  const int64_t planes = input.numel() / (h * wd);
  Shape out_shape = input.sizes();
  out_shape[out_shape.size() - 2] = o[0];
  out_shape[out_shape.size() - 1] = o[1];
  const TensorOptions opts = TensorOptions().dtype(input.dtype()).device(input.device());
  // ceil_mode's last windows may reach past the padding: zeros appended below and to the
  // right let unfold take them (they are summed, but never counted in a divisor).
  std::array<int64_t, 2> extra{};
  for (int d = 0; d < 2; ++d) {
    const int64_t in = d == 0 ? h : wd;
    const int64_t reach = (o[d] - 1) * w.stride[d] + w.kernel[d];  // the last window's end
    extra[d] = std::max<int64_t>(0, reach - in - 2 * w.padding[d]);
  }
  Tensor x = reshape(input, {planes, 1, h, wd});
  if (extra[0] > 0) x = cat({x, zeros({planes, 1, extra[0], wd}, opts)}, 2);
  if (extra[1] > 0) x = cat({x, zeros({planes, 1, h + extra[0], extra[1]}, opts)}, 3);
  const std::array<int64_t, 2> k{w.kernel[0], w.kernel[1]};
  const Tensor cols = unfold(x, k, as_conv(w));  // [P, kk, L]
  const std::array<std::vector<int64_t>, 2> extents{
      window_extents(h, o[0], w, 0, p.count_include_pad),
      window_extents(wd, o[1], w, 1, p.count_include_pad)};
  std::vector<double> divisors;
  bool whole_windows = true;
  for (int64_t i = 0; i < o[0]; ++i) {
    for (int64_t j = 0; j < o[1]; ++j) {
      divisors.push_back(static_cast<double>(extents[0][i] * extents[1][j]));
      whole_windows = whole_windows && extents[0][i] * extents[1][j] == k[0] * k[1];
    }
  }
  if (whole_windows) return reshape(mean(cols, {1}), out_shape);
  const Tensor divisor = from_vector<double>(divisors, {1, o[0] * o[1]}, opts);
  return reshape(div(sum(cols, {1}), divisor), out_shape);
}

}  // namespace streamgrad

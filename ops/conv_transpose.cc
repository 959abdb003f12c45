// conv_transpose2d: the reference's transposed convolution, which is conv2d's gradient with
// respect to its input (the same weight read the other way: [C_in, C_out / groups, kH,
// kW]), so it goes through conv2d_input_grad (ops/conv.cc: col2im of the weight's
// columns) and is differentiable to any order like it. Output size per spatial dim:
// (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
#include "absl/strings/str_cat.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

std::string pair_str(std::array<int64_t, 2> v) { return absl::StrCat("(", v[0], ", ", v[1], ")"); }

}  // namespace

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose2dParams& p) {
  check_defined(input, "conv_transpose2d", "the input");
  check_defined(weight, "conv_transpose2d", "the weight");
  check_floating(input, "conv_transpose2d");
  SG_CHECK(input.dim() == 3 || input.dim() == 4, ValueError,
           "conv_transpose2d: expected an input [N, C, H, W] or [C, H, W], got ",
           input.describe());
  if (input.dim() == 3) {  // unbatched
    const Tensor out = conv_transpose2d(unsqueeze(input, 0), weight, bias, p);
    return reshape(out, {out.size(1), out.size(2), out.size(3)});
  }
  SG_CHECK(weight.dim() == 4, ValueError,
           "conv_transpose2d: expected a weight [C_in, C_out / groups, kH, kW], got ",
           weight.describe());
  SG_CHECK(p.groups > 0 && weight.size(0) % p.groups == 0, ValueError,
           "conv_transpose2d: groups ", p.groups, " must divide the weight's C_in ",
           weight.size(0), " (weight ", weight.describe(), ")");
  SG_CHECK(input.size(1) == weight.size(0), ValueError, "conv_transpose2d: input ",
           input.describe(), " has ", input.size(1), " channels, the weight ",
           weight.describe(), " expects ", weight.size(0), " (its dim 0)");
  const int64_t out_ch = weight.size(1) * p.groups;
  Shape out_size = {input.size(0), out_ch, 0, 0};
  for (int d = 0; d < 2; ++d) {
    SG_CHECK(p.stride[d] > 0 && p.dilation[d] > 0 && p.padding[d] >= 0 &&
                 p.output_padding[d] >= 0,
             ValueError, "conv_transpose2d: stride ", pair_str(p.stride), " and dilation ",
             pair_str(p.dilation), " must be positive, padding ", pair_str(p.padding),
             " and output_padding ", pair_str(p.output_padding), " non-negative");
    SG_CHECK(p.output_padding[d] < p.stride[d] || p.output_padding[d] < p.dilation[d],
             ValueError, "conv_transpose2d: output_padding ", pair_str(p.output_padding),
             " must be smaller than either stride ", pair_str(p.stride), " or dilation ",
             pair_str(p.dilation), " in each dimension");
    const int64_t k = weight.size(2 + d);
    out_size[2 + d] = (input.size(2 + d) - 1) * p.stride[d] - 2 * p.padding[d] +
                      p.dilation[d] * (k - 1) + p.output_padding[d] + 1;
    SG_CHECK(out_size[2 + d] > 0, ValueError, "conv_transpose2d: input ", input.describe(),
             " with weight ", weight.describe(), ", stride ", pair_str(p.stride), ", padding ",
             pair_str(p.padding), " and dilation ", pair_str(p.dilation),
             " gives an empty output; use less padding");
  }
  if (bias.defined()) {
    SG_CHECK(bias.dim() == 1 && bias.size(0) == out_ch, ValueError,
             "conv_transpose2d: expected a bias of ", out_ch, " elements (C_out), got ",
             bias.describe());
  }
  Conv2dParams c;
  c.stride = p.stride;
  c.padding = p.padding;
  c.dilation = p.dilation;
  c.groups = p.groups;
  const Tensor out = conv2d_input_grad(out_size, weight, input, c);
  return bias.defined() ? add(out, reshape(bias, {1, out_ch, 1, 1})) : out;
}

}  // namespace streamgrad

// The cuDNN convolution entry points (kernels/nn_kernels.h): the front door. Checks, then
// the implementation registered for cuda (kernels/cuda/cudnn_conv.cu), the only one: cpu
// and sim streams are refused, conv2d there is unfold and matmul (ops/conv.cc), and these
// exist only to hand cuda's work to cuDNN.
#include <climits>
#include <cstdint>
#include <vector>

#include "kernels/checks.h"
#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/nn_kernels.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using dispatch::KernelId;
using ConvImpl = dispatch::Impl<KernelId::kCudnnConv2d>;

int64_t out_size(const Window2d& w, int d, int64_t in) {
  return window_output_size(in, w.kernel[d], w.stride[d], w.padding[d], w.dilation[d]);
}

ConvShape shape_of(const std::vector<int64_t>& in, const std::vector<int64_t>& weight,
                   const Window2d& w, int64_t groups) {
  return ConvShape{in[0],
                   in[1],
                   in[2],
                   in[3],
                   weight[0],
                   weight[2],
                   weight[3],
                   out_size(w, 0, in[2]),
                   out_size(w, 1, in[3]),
                   groups};
}

// cuDNN's legacy descriptors take int sizes and index tensors with 32-bit offsets.
bool within_cudnn_limits(const ConvShape& s, const Window2d& w) {
  const int64_t values[] = {s.n,
                            s.c,
                            s.h,
                            s.w,
                            s.o,
                            s.kh,
                            s.kw,
                            s.oh,
                            s.ow,
                            s.groups,
                            w.stride[0],
                            w.stride[1],
                            w.padding[0],
                            w.padding[1],
                            w.dilation[0],
                            w.dilation[1],
                            s.n * s.c * s.h * s.w,
                            s.n * s.o * s.oh * s.ow,
                            s.o * (s.c / s.groups) * s.kh * s.kw};
  for (int64_t v : values) {
    if (v > INT_MAX) return false;
  }
  return true;
}

// The cuda implementation, for cuda streams only.
ConvImpl resolve_conv(const char* kernel, const Stream& stream) {
  SG_CHECK(stream.device().type() == DeviceType::kCuda, DeviceError, kernel,
           ": runs on cuda "
           "streams only, not ",
           stream.str(), "; conv2d on cpu and sim uses unfold and matmul");
  return dispatch::resolve<KernelId::kCudnnConv2d>(kernel, stream);
}

// Checks the three views of one pass against each other; `image` is [N, C, H, W] and
// `result` [N, O, oH, oW].
ConvShape check_views(const char* kernel, const View& image, const View& weight,
                      const View& result, const Window2d& w, int64_t groups) {
  cpu::check_contiguous(kernel, "image", image, 4);
  cpu::check_contiguous(kernel, "weight", weight, 4);
  cpu::check_contiguous(kernel, "output", result, 4);
  cpu::check_floating(kernel, "image", image);
  cpu::check_same_dtype(kernel, "image", image, "weight", weight);
  cpu::check_same_dtype(kernel, "image", image, "output", result);
  SG_CHECK(image.dtype == DType::kFloat32 || image.dtype == DType::kFloat64, ValueError, kernel,
           ": cuDNN convolution takes float32 or float64, got ", cpu::describe(image));
  SG_CHECK(
      groups > 0 && image.sizes[1] == weight.sizes[1] * groups && weight.sizes[0] % groups == 0,
      ValueError, kernel, ": image ", cpu::describe(image), " and weight ", cpu::describe(weight),
      " do not match ", groups, " groups");
  const ConvShape s = shape_of(image.sizes, weight.sizes, w, groups);
  SG_CHECK(result.sizes[0] == s.n && result.sizes[1] == s.o && result.sizes[2] == s.oh &&
               result.sizes[3] == s.ow && s.oh > 0 && s.ow > 0,
           ValueError, kernel, ": output ", cpu::describe(result), " does not match image ",
           cpu::describe(image), " and weight ", cpu::describe(weight), " (expected [", s.n, ", ",
           s.o, ", ", s.oh, ", ", s.ow, "])");
  SG_CHECK(within_cudnn_limits(s, w), ValueError, kernel, ": image ", cpu::describe(image),
           " or weight ", cpu::describe(weight), " exceeds cuDNN's 32-bit sizes; split the batch");
  return s;
}

// Writes a (named `written`) from b and c, which it must not overlap.
void launch_pass(const ConvImpl& impl, const char* kernel, const char* written,
                 const Stream& stream, ConvPass pass, const ConvShape& s, const Window2d& w,
                 const View& a, const View& b, const View& c) {
  cpu::check_disjoint(kernel, written, a, "an input", b);
  cpu::check_disjoint(kernel, written, a, "an input", c);
  impl.fn(stream, dispatch::LaunchSpec(kernel, {&b, &c}, {&a}), pass, a.dtype, s, w, a.data,
          b.data, c.data);
}

}  // namespace

bool cudnn_conv2d_supported(const Device& device, DType dt, const std::vector<int64_t>& in,
                            const std::vector<int64_t>& weight, const Window2d& w, int64_t groups) {
  if (!dispatch::has_impl(KernelId::kCudnnConv2d, device.type())) return false;
  if (device.type() != DeviceType::kCuda) return false;
  if (dt != DType::kFloat32 && dt != DType::kFloat64) return false;
  if (in.size() != 4 || weight.size() != 4 || groups < 1) return false;
  return within_cudnn_limits(shape_of(in, weight, w, groups), w);
}

void cudnn_conv2d(const Stream& stream, const View& out, const View& in, const View& weight,
                  const Window2d& w, int64_t groups) {
  const char* kernel = "cudnn_conv2d";
  const ConvImpl impl = resolve_conv(kernel, stream);
  const ConvShape s = check_views(kernel, in, weight, out, w, groups);
  launch_pass(impl, kernel, "output", stream, ConvPass::kForward, s, w, out, in, weight);
}

void cudnn_conv2d_backward_input(const Stream& stream, const View& grad_in, const View& grad_out,
                                 const View& weight, const Window2d& w, int64_t groups) {
  const char* kernel = "cudnn_conv2d_backward_input";
  const ConvImpl impl = resolve_conv(kernel, stream);
  const ConvShape s = check_views(kernel, grad_in, weight, grad_out, w, groups);
  launch_pass(impl, kernel, "grad_in", stream, ConvPass::kBackwardInput, s, w, grad_in, grad_out, weight);
}

void cudnn_conv2d_backward_weight(const Stream& stream, const View& grad_weight,
                                  const View& grad_out, const View& in, const Window2d& w,
                                  int64_t groups) {
  const char* kernel = "cudnn_conv2d_backward_weight";
  const ConvImpl impl = resolve_conv(kernel, stream);
  const ConvShape s = check_views(kernel, in, grad_weight, grad_out, w, groups);
  launch_pass(impl, kernel, "grad_weight", stream, ConvPass::kBackwardWeight, s, w, grad_weight, grad_out,
              in);
}

}  // namespace kernels
}  // namespace streamgrad

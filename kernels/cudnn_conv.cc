// The cuDNN convolution entry points (kernels/nn_kernels.h): checks, then a launch whose
// work is kernels/cuda/cudnn_conv.cu. cpu and sim streams are refused: conv2d there is
// unfold and matmul (ops/conv.cc), and these exist only to hand cuda's work to cuDNN.
#include <climits>
#include <cstdint>
#include <vector>

#include "kernels/checks.h"
#include "kernels/launch_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/nn_kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {


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

// Checks the three views of one pass against each other; `image` is [N, C, H, W] and
// `result` [N, O, oH, oW].
ConvShape check_views(const char* kernel, const Stream& stream, const View& image,
                      const View& weight, const View& result, const Window2d& w, int64_t groups) {
  SG_CHECK(stream.device().type() == DeviceType::kCuda, DeviceError, kernel,
           ": runs on cuda "
           "streams only, not ",
           stream.str(), "; conv2d on cpu and sim uses unfold and matmul");
  cpu::check_stream(kernel, stream, /*has_cuda=*/true);
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
void launch_pass(const char* kernel, const char* written, const Stream& stream, ConvPass pass,
                 const ConvShape& s, const Window2d& w, const View& a, const View& b,
                 const View& c) {
  cpu::check_disjoint(kernel, written, a, "an input", b);
  cpu::check_disjoint(kernel, written, a, "an input", c);
  void* pa = a.data;
  const void* pb = b.data;
  const void* pc = c.data;
  const DType dt = a.dtype;
  cpu::launch_kernel(stream, kernel, {&b, &c}, {&a},
                     [=] { cuda::cudnn_conv2d(stream, pass, dt, s, w, pa, pb, pc); });
}

}  // namespace

bool cudnn_conv2d_supported(const Device& device, DType dt, const std::vector<int64_t>& in,
                            const std::vector<int64_t>& weight, const Window2d& w, int64_t groups) {
#if defined(SG_CUDA_KERNELS)
  if (device.type() != DeviceType::kCuda) return false;
  if (dt != DType::kFloat32 && dt != DType::kFloat64) return false;
  if (in.size() != 4 || weight.size() != 4 || groups < 1) return false;
  return within_cudnn_limits(shape_of(in, weight, w, groups), w);
#else
  (void)device, (void)dt, (void)in, (void)weight, (void)w, (void)groups;
  return false;
#endif
}

void cudnn_conv2d(const Stream& stream, const View& out, const View& in, const View& weight,
                  const Window2d& w, int64_t groups) {
  const ConvShape s = check_views("cudnn_conv2d", stream, in, weight, out, w, groups);
  launch_pass("cudnn_conv2d", "output", stream, ConvPass::kForward, s, w, out, in, weight);
}

void cudnn_conv2d_backward_input(const Stream& stream, const View& grad_in, const View& grad_out,
                                 const View& weight, const Window2d& w, int64_t groups) {
  const char* kernel = "cudnn_conv2d_backward_input";
  const ConvShape s = check_views(kernel, stream, grad_in, weight, grad_out, w, groups);
  launch_pass(kernel, "grad_in", stream, ConvPass::kBackwardInput, s, w, grad_in, grad_out, weight);
}

void cudnn_conv2d_backward_weight(const Stream& stream, const View& grad_weight,
                                  const View& grad_out, const View& in, const Window2d& w,
                                  int64_t groups) {
  const char* kernel = "cudnn_conv2d_backward_weight";
  const ConvShape s = check_views(kernel, stream, in, grad_weight, grad_out, w, groups);
  launch_pass(kernel, "grad_weight", stream, ConvPass::kBackwardWeight, s, w, grad_weight, grad_out,
              in);
}

}  // namespace kernels
}  // namespace streamgrad

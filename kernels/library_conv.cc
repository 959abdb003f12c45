// Convolution through the device's convolution library (kernels/nn_kernels.h): the front
// door. Checks, then the implementation registered for the stream's device: cuDNN on cuda
// (kernels/cuda/cudnn_conv.cu), oneDNN on cpu and sim (kernels/host/onednn_conv.cc). Each
// library has its own limits (cuDNN's 32-bit sizes; oneDNN's float32 only); conv2d takes
// this path only where library_conv2d_supported says so and uses unfold and matmul
// elsewhere. float16 and bfloat16 calls run the float32 plan on float32 copies of their
// operands, widened whole (widen.h), and round each result once: sums in float32, as the
// reference framework's cuDNN and oneDNN paths make them. On an H200 cuDNN's own 16-bit
// descriptors trained a ResNet slower than unfold and matmul, which were ~5x slower than
// float32 (bench/RESULTS.md); the float32 plans are the ones known to be fast, and on a
// 2-core host the bf16 ResNet trained 2.8x faster through oneDNN's than through unfold
// and matmul.
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks.h"
#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/front.h"
#include "kernels/nn_kernels.h"
#include "kernels/widen.h"
#include "runtime/backend/cpu_settings.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using dispatch::KernelId;
using ConvImpl = dispatch::Impl<KernelId::kConv2d>;

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

// The float32 copies of a 16-bit call's operands, at most: both gradients widen grad_out,
// the image, the weight and their two gradients.
int64_t widened_elements(const ConvShape& s) {
  const int64_t image = s.n * s.c * s.h * s.w, result = s.n * s.o * s.oh * s.ow;
  const int64_t weight = s.o * (s.c / s.groups) * s.kh * s.kw;
  return 2 * image + 2 * weight + result;
}

// What the device's library takes: cuDNN float32 and float64 within its 32-bit sizes;
// oneDNN float32; on both, float16 and bfloat16 whose float32 copies stay within the
// widening cap (widen.h's cuda bound: the calls widen whole). Empty when it takes the
// shape.
std::string library_refusal(DeviceType device, DType dt, const ConvShape& s, const Window2d& w) {
  if (is_reduced_floating(dt)) {
    const std::string plain = library_refusal(device, DType::kFloat32, s, w);
    if (!plain.empty()) return plain;
    if (widened_elements(s) > cpu::kWidenChunkElementsCuda) {
      return absl::StrCat("its float32 copies would hold ", widened_elements(s),
                          " elements, more than the ", cpu::kWidenChunkElementsCuda,
                          " a widened call may");
    }
    return "";
  }
  if (device == DeviceType::kCuda) {
    if (dt != DType::kFloat32 && dt != DType::kFloat64) {
      return "cuDNN convolution takes float32 or float64";
    }
    if (!within_cudnn_limits(s, w)) return "it exceeds cuDNN's 32-bit sizes; split the batch";
    return "";
  }
  return dt == DType::kFloat32 ? "" : "oneDNN convolution takes float32";
}

// Checks the three views of one pass against each other; `image` is [N, C, H, W] and
// `result` [N, O, oH, oW].
ConvShape check_views(const char* kernel, DeviceType device, const View& image,
                      const View& weight, const View& result, const Window2d& w,
                      int64_t groups) {
  cpu::check_contiguous(kernel, "image", image, 4);
  cpu::check_contiguous(kernel, "weight", weight, 4);
  cpu::check_contiguous(kernel, "output", result, 4);
  cpu::check_floating(kernel, "image", image);
  cpu::check_same_dtype(kernel, "image", image, "weight", weight);
  cpu::check_same_dtype(kernel, "image", image, "output", result);
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
  const std::string refused = library_refusal(device, image.dtype, s, w);
  SG_CHECK(refused.empty(), ValueError, kernel, ": cannot take image ", cpu::describe(image),
           " and weight ", cpu::describe(weight), ": ", refused,
           " (conv2d uses unfold and matmul for such inputs)");
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

bool library_conv2d_supported(const Device& device, DType dt, const std::vector<int64_t>& in,
                              const std::vector<int64_t>& weight, const Window2d& w,
                              int64_t groups) {
  if (!dispatch::has_impl(KernelId::kConv2d, device.type())) return false;
  if (device.type() != DeviceType::kCuda && !onednn_enabled()) return false;
  if (in.size() != 4 || weight.size() != 4 || groups < 1) return false;
  const ConvShape s = shape_of(in, weight, w, groups);
  if (s.oh <= 0 || s.ow <= 0) return false;
  return library_refusal(device.type(), dt, s, w).empty();
}

namespace {

// A launch is named after the library and what it computes (onednn_conv2d,
// cudnn_conv2d_backward_input, ...), so that traces and errors say which library ran:
// `what` is a ConvPass, or kBothGradients.
constexpr int kBothGradients = 3;
const char* launch_name(const Stream& stream, int what) {
  // Literals: a launch keeps its name past the call (sim runs it later).
  static const char* const kNames[2][4] = {
      {"cudnn_conv2d", "cudnn_conv2d_backward_input", "cudnn_conv2d_backward_weight",
       "cudnn_conv2d_backward"},
      {"onednn_conv2d", "onednn_conv2d_backward_input", "onednn_conv2d_backward_weight",
       "onednn_conv2d_backward"}};
  return kNames[stream.device().type() == DeviceType::kCuda ? 0 : 1][what];
}

// Both gradients of one launch, on views of one dtype that the library takes.
void launch_both(const dispatch::Impl<KernelId::kConv2dBackward>& impl, const char* kernel,
                 const Stream& stream, const View& grad_in, const View& grad_weight,
                 const View& grad_out, const View& in, const View& weight, const Window2d& w,
                 int64_t groups) {
  SG_CHECK(grad_in.sizes == in.sizes && grad_weight.sizes == weight.sizes, ValueError, kernel,
           ": grad_in ", cpu::describe(grad_in), " and grad_weight ", cpu::describe(grad_weight),
           " must have the sizes of the image ", cpu::describe(in), " and weight ",
           cpu::describe(weight));
  const ConvShape s =
      check_views(kernel, stream.device().type(), grad_in, weight, grad_out, w, groups);
  check_views(kernel, stream.device().type(), in, grad_weight, grad_out, w, groups);
  for (const View* read : {&grad_out, &in, &weight}) {
    cpu::check_disjoint(kernel, "grad_in", grad_in, "an input", *read);
    cpu::check_disjoint(kernel, "grad_weight", grad_weight, "an input", *read);
  }
  cpu::check_disjoint(kernel, "grad_in", grad_in, "grad_weight", grad_weight);
  impl.fn(stream,
          dispatch::LaunchSpec(kernel, {&grad_out, &in, &weight}, {&grad_in, &grad_weight}),
          grad_in.dtype, s, w, grad_in.data, grad_weight.data, grad_out.data, in.data,
          weight.data);
}

// One pass writing `written` from the inputs b and c (ConvPass names them): float16 and
// bfloat16 views are widened whole by the front door (front.h) and the float32 plan runs
// on the copies.
void run_pass(ConvPass pass, const Stream& stream, const View& written, const View& b,
              const View& c, const Window2d& w, int64_t groups) {
  static const char* const kWritten[] = {"output", "grad_in", "grad_weight"};
  const int i = static_cast<int>(pass);
  const char* kernel = launch_name(stream, i);
  const ConvImpl impl = dispatch::resolve<KernelId::kConv2d>(kernel, stream);
  front::call(impl, stream, kernel, front::Mode(), front::Operands<1>{written},
              front::Operands<2>{b, c},
              [&](const front::Operands<1>& o, const front::Operands<2>& in, bool) {
                // Which of the three is the image, the weight and the result.
                const View& image = pass == ConvPass::kForward         ? in[0]
                                    : pass == ConvPass::kBackwardInput ? o[0]
                                                                       : in[1];
                const View& weight = pass == ConvPass::kBackwardWeight ? o[0] : in[1];
                const View& result = pass == ConvPass::kForward ? o[0] : in[0];
                const ConvShape s = check_views(kernel, stream.device().type(), image, weight,
                                                result, w, groups);
                launch_pass(impl, kernel, kWritten[i], stream, pass, s, w, o[0], in[0], in[1]);
              });
}

}  // namespace

void library_conv2d(const Stream& stream, const View& out, const View& in, const View& weight,
                    const Window2d& w, int64_t groups) {
  run_pass(ConvPass::kForward, stream, out, in, weight, w, groups);
}

void library_conv2d_backward_input(const Stream& stream, const View& grad_in,
                                   const View& grad_out, const View& weight, const Window2d& w,
                                   int64_t groups) {
  run_pass(ConvPass::kBackwardInput, stream, grad_in, grad_out, weight, w, groups);
}

void library_conv2d_backward_weight(const Stream& stream, const View& grad_weight,
                                    const View& grad_out, const View& in, const Window2d& w,
                                    int64_t groups) {
  run_pass(ConvPass::kBackwardWeight, stream, grad_weight, grad_out, in, w, groups);
}

void library_conv2d_backward(const Stream& stream, const View& grad_in, const View& grad_weight,
                             const View& grad_out, const View& in, const View& weight,
                             const Window2d& w, int64_t groups) {
  const char* kernel = launch_name(stream, kBothGradients);
  const auto impl = dispatch::resolve<KernelId::kConv2dBackward>(kernel, stream);
  front::call(impl, stream, kernel, front::Mode(), front::Operands<2>{grad_in, grad_weight},
              front::Operands<3>{grad_out, in, weight},
              [&](const front::Operands<2>& o, const front::Operands<3>& i, bool) {
                launch_both(impl, kernel, stream, o[0], o[1], i[0], i[1], i[2], w, groups);
              });
}

}  // namespace kernels
}  // namespace streamgrad

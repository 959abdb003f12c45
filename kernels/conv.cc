// im2col and col2im: the front door (kernels/nn_kernels.h). Checks here, then the
// implementation registered for the stream's device (kernels/host/conv.cc on cpu and sim,
// kernels/cuda/nn.cu on cuda). im2col only moves elements: the host takes 16-bit views as
// they are, cuda widens them; col2im accumulates in float32, a few images at a time.
#include <algorithm>
#include <cstdint>

#include "kernels/checks.h"
#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/front.h"
#include "kernels/nn_kernels.h"
#include "kernels/widen.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Operands;

// The window's output size along dim d (0: rows, 1: columns) for an input of size `in`.
int64_t out_size(const Window2d& w, int d, int64_t in) {
  return window_output_size(in, w.kernel[d], w.stride[d], w.padding[d], w.dilation[d]);
}

// Checks cols [B, C*kH*kW, oH*oW] against image [B, C, H, W].
void check_columns(const char* kernel, const View& cols, const View& image, const Window2d& w) {
  cpu::check_contiguous(kernel, "columns", cols, 3);
  cpu::check_contiguous(kernel, "image", image, 4);
  cpu::check_floating(kernel, "image", image);
  cpu::check_same_dtype(kernel, "columns", cols, "image", image);
  const int64_t oh = out_size(w, 0, image.sizes[2]), ow = out_size(w, 1, image.sizes[3]);
  SG_CHECK(cols.sizes[0] == image.sizes[0] &&
               cols.sizes[1] == image.sizes[1] * w.kernel[0] * w.kernel[1] &&
               cols.sizes[2] == oh * ow,
           ValueError, kernel, ": columns ", cpu::describe(cols), " do not match image ",
           cpu::describe(image), " with a ", w.kernel[0], "x", w.kernel[1],
           " window (expected [", image.sizes[0], ", ",
           image.sizes[1] * w.kernel[0] * w.kernel[1], ", ", oh * ow, "])");
  cpu::check_disjoint(kernel, "columns", cols, "image", image);
}

// The shape the implementations walk: image [B, C, H, W], oh x ow window positions.
ImageShape shape_of(const View& image, const View& cols, const Window2d& w) {
  const int64_t oh = out_size(w, 0, image.sizes[2]);
  return {image.sizes[0], image.sizes[1], image.sizes[2], image.sizes[3], oh,
          oh == 0 ? 0 : cols.sizes[2] / oh};
}

}  // namespace

void im2col(const Stream& stream, const View& cols, const View& in, const Window2d& w) {
  const char* name = "im2col";
  const auto impl = dispatch::resolve<KernelId::kIm2col>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{cols}, Operands<1>{in},
              [&](const Operands<1>& o, const Operands<1>& i, bool) {
                const View &c = o[0], &x = i[0];
                check_columns(name, c, x, w);
                if (c.numel() == 0) return;
                impl.fn(stream, LaunchSpec(name, {&x}, {&c}), x.dtype, shape_of(x, c, w), w,
                        c.data, x.data);
              });
}

void col2im(const Stream& stream, const View& out, const View& cols, const Window2d& w) {
  const char* name = "col2im";
  const auto impl = dispatch::resolve<KernelId::kCol2im>(name, stream);
  if (front::widens(impl.options, {&out, &cols})) {
    // A large batch is folded in chunks of images, each widened on its own.
    const int64_t items = out.dim() == 4 && cols.dim() == 3 && cols.sizes[0] == out.sizes[0]
                              ? out.sizes[0] : 0;
    const int64_t chunk =
        items > 0 ? cpu::batch_chunk(stream, (out.numel() + cols.numel()) / items) : 0;
    if (items > 0 && chunk < items) {
      for (int64_t i = 0; i < items; i += chunk) {
        const int64_t n = std::min(chunk, items - i);
        col2im(stream, cpu::batch_slice(out, i, n), cpu::batch_slice(cols, i, n), w);
      }
      return;
    }
  }
  front::call(impl, stream, name, front::kAccumulate, Operands<1>{out}, Operands<1>{cols},
              [&](const Operands<1>& o, const Operands<1>& i, bool) {
                const View &img = o[0], &c = i[0];
                check_columns(name, c, img, w);
                cpu::check_output(name, "out", img);
                if (c.numel() == 0) return;
                impl.fn(stream, LaunchSpec(name, {&c, &img}, {&img}), img.dtype,
                        shape_of(img, c, w), w, img.data, c.data);
              });
}

}  // namespace kernels
}  // namespace streamgrad

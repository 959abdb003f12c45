// im2col and col2im on cpu and sim streams (kernels/nn_kernels.h).
//
// Loops run over (plane, kernel tap, output row) with the output column innermost, so
// the inner loop is a strided copy the compiler vectorises when the stride is 1.
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/launch_kernel.h"
#include "kernels/cpu/strided.h"
#include "kernels/nn_kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

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

// Calls fn(plane_image_offset, column_row, ih, iw_base, oi) for every (image plane,
// kernel tap, output row) whose input row lies inside the image; the caller walks the
// output columns.
struct ColumnRange {
  int64_t begin, end;
};

struct ColumnWalk {
  int64_t batch, channels, height, width, oh, ow;
  Window2d w;
  // The output columns whose input column for tap kj lies inside the image (padding
  // reads zeros): computed once per row so that the copies need no per-element checks.
  ColumnRange columns_inside(int64_t kj) const {
    int64_t begin = 0;
    while (begin < ow &&
           window_input_index(begin, kj, w.stride[1], w.padding[1], w.dilation[1]) < 0) {
      ++begin;
    }
    int64_t end = ow;
    while (end > begin &&
           window_input_index(end - 1, kj, w.stride[1], w.padding[1], w.dilation[1]) >= width) {
      --end;
    }
    return {begin, end};
  }
  template <typename Fn>
  void operator()(Fn fn) const {
    const int64_t taps = w.kernel[0] * w.kernel[1];
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t plane = (b * channels + c) * height * width;
        for (int64_t ki = 0; ki < w.kernel[0]; ++ki) {
          for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
            const int64_t row = (b * channels * taps + c * taps + ki * w.kernel[1] + kj) * oh * ow;
            for (int64_t oi = 0; oi < oh; ++oi) {
              const int64_t ih = window_input_index(oi, ki, w.stride[0], w.padding[0], w.dilation[0]);
              fn(plane, row + oi * ow, ih, kj, ih >= 0 && ih < height);
            }
          }
        }
      }
    }
  }
};

// dst[j] += src[j]: the two are disjoint (check_columns), which the compiler is told so
// that the loop is vector code without an alias check.
template <typename T>
void add_row(T* __restrict dst, const T* __restrict src, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
}

ColumnWalk walk_of(const View& image, const View& cols, const Window2d& w) {
  const int64_t oh = out_size(w, 0, image.sizes[2]);
  return {image.sizes[0], image.sizes[1], image.sizes[2], image.sizes[3], oh,
          oh == 0 ? 0 : cols.sizes[2] / oh, w};
}

}  // namespace

void im2col(const Stream& stream, const View& cols, const View& in, const Window2d& w) {
  const char* name = "im2col";
  cpu::check_stream(name, stream);
  check_columns(name, cols, in, w);
  if (cols.numel() == 0) return;
  const ColumnWalk walk = walk_of(in, cols, w);
  void* o = cols.data;
  const void* x = in.data;
  cpu::launch_kernel(stream, name, {&in}, {&cols}, [walk, o, x, dt = in.dtype] {
    cpu::dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      T* out = static_cast<T*>(o);
      const T* img = static_cast<const T*>(x);
      const Window2d& w = walk.w;
      walk([&](int64_t plane, int64_t at, int64_t ih, int64_t kj, bool row_inside) {
        T* dst = out + at;
        const ColumnRange r = walk.columns_inside(kj);
        if (!row_inside || r.begin >= r.end) {
          std::fill(dst, dst + walk.ow, T(0));
          return;
        }
        std::fill(dst, dst + r.begin, T(0));
        std::fill(dst + r.end, dst + walk.ow, T(0));
        const T* src = img + plane + ih * walk.width +
                       window_input_index(r.begin, kj, w.stride[1], w.padding[1], w.dilation[1]);
        const int64_t step = w.stride[1];
        if (step == 1) {
          std::copy(src, src + (r.end - r.begin), dst + r.begin);
        } else {
          for (int64_t oj = r.begin; oj < r.end; ++oj) dst[oj] = src[(oj - r.begin) * step];
        }
      });
    });
  });
}

void col2im(const Stream& stream, const View& out, const View& cols, const Window2d& w) {
  const char* name = "col2im";
  cpu::check_stream(name, stream);
  check_columns(name, cols, out, w);
  cpu::check_output(name, "out", out);
  if (cols.numel() == 0) return;
  const ColumnWalk walk = walk_of(out, cols, w);
  void* o = out.data;
  const void* x = cols.data;
  cpu::launch_kernel(stream, name, {&cols, &out}, {&out}, [walk, o, x, dt = out.dtype] {
    cpu::dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      T* img = static_cast<T*>(o);
      const T* in = static_cast<const T*>(x);
      const Window2d& w = walk.w;
      // One thread in a fixed order: overlapping windows sum deterministically.
      walk([&](int64_t plane, int64_t at, int64_t ih, int64_t kj, bool row_inside) {
        const ColumnRange r = walk.columns_inside(kj);
        if (!row_inside || r.begin >= r.end) return;
        const T* src = in + at;
        T* dst = img + plane + ih * walk.width +
                 window_input_index(r.begin, kj, w.stride[1], w.padding[1], w.dilation[1]);
        const int64_t step = w.stride[1];
        if (step == 1) {
          add_row(dst, src + r.begin, r.end - r.begin);
        } else {
          for (int64_t oj = r.begin; oj < r.end; ++oj) dst[(oj - r.begin) * step] += src[oj];
        }
      });
    });
  });
}

}  // namespace kernels
}  // namespace streamgrad

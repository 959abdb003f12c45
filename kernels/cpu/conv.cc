// im2col, col2im and max_pool2d on cpu and sim streams (kernels/nn_kernels.h).
//
// Loops run over (plane, kernel tap, output row) with the output column innermost, so
// the inner loop is a strided copy the compiler vectorises when the stride is 1.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/launch_kernel.h"
#include "kernels/cpu/strided.h"
#include "kernels/nn_kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

void check_contiguous(const char* kernel, const char* what, const View& v, int64_t rank) {
  cpu::check_view(kernel, what, v);
  SG_CHECK(v.dim() == rank && v.is_contiguous(), ValueError, kernel, ": ", what,
           " must be a contiguous ", rank, "-D view, got ", cpu::describe(v));
}

// The window's output size along dim d (0: rows, 1: columns) for an input of size `in`.
int64_t out_size(const Window2d& w, int d, int64_t in) {
  return window_output_size(in, w.kernel[d], w.stride[d], w.padding[d], w.dilation[d]);
}

// Checks cols [B, C*kH*kW, oH*oW] against image [B, C, H, W].
void check_columns(const char* kernel, const View& cols, const View& image, const Window2d& w) {
  check_contiguous(kernel, "columns", cols, 3);
  check_contiguous(kernel, "image", image, 4);
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
struct ColumnWalk {
  int64_t batch, channels, height, width, oh, ow;
  Window2d w;
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
        for (int64_t oj = 0; oj < walk.ow; ++oj) {
          const int64_t iw = window_input_index(oj, kj, w.stride[1], w.padding[1], w.dilation[1]);
          dst[oj] = row_inside && iw >= 0 && iw < walk.width
                        ? img[plane + ih * walk.width + iw]
                        : T(0);
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
        if (!row_inside) return;
        const T* src = in + at;
        for (int64_t oj = 0; oj < walk.ow; ++oj) {
          const int64_t iw = window_input_index(oj, kj, w.stride[1], w.padding[1], w.dilation[1]);
          if (iw >= 0 && iw < walk.width) img[plane + ih * walk.width + iw] += src[oj];
        }
      });
    });
  });
}

void max_pool2d(const Stream& stream, const View& values, const View& indices, const View& in,
                const Window2d& w) {
  const char* name = "max_pool2d";
  cpu::check_stream(name, stream);
  check_contiguous(name, "in", in, 3);
  check_contiguous(name, "values", values, 3);
  check_contiguous(name, "indices", indices, 3);
  cpu::check_floating(name, "in", in);
  cpu::check_same_dtype(name, "values", values, "in", in);
  cpu::check_dtype(name, "indices", indices, DType::kInt64);
  cpu::check_same_sizes(name, "values", values, "indices", indices);
  SG_CHECK(values.sizes[0] == in.sizes[0], ValueError, name, ": values ",
           cpu::describe(values), " and in ", cpu::describe(in), " differ in planes");
  cpu::check_disjoint(name, "values", values, "in", in);
  cpu::check_disjoint(name, "indices", indices, "in", in);
  if (values.numel() == 0) return;
  const int64_t planes = in.sizes[0], h = in.sizes[1], wd = in.sizes[2];
  const int64_t oh = values.sizes[1], ow = values.sizes[2];
  void* vo = values.data;
  void* io = indices.data;
  const void* x = in.data;
  cpu::launch_kernel(stream, name, {&in}, {&values, &indices}, [=, dt = in.dtype] {
    cpu::dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      T* val = static_cast<T*>(vo);
      int64_t* idx = static_cast<int64_t*>(io);
      const T* img = static_cast<const T*>(x);
      for (int64_t p = 0; p < planes; ++p) {
        const T* plane = img + p * h * wd;
        for (int64_t oi = 0; oi < oh; ++oi) {
          for (int64_t oj = 0; oj < ow; ++oj) {
            T best = -std::numeric_limits<T>::infinity();
            int64_t at = -1;
            for (int64_t ki = 0; ki < w.kernel[0]; ++ki) {
              const int64_t ih = window_input_index(oi, ki, w.stride[0], w.padding[0], w.dilation[0]);
              if (ih < 0 || ih >= h) continue;
              for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
                const int64_t iw = window_input_index(oj, kj, w.stride[1], w.padding[1], w.dilation[1]);
                if (iw < 0 || iw >= wd) continue;
                const T v = plane[ih * wd + iw];
                if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
                  best = v;
                  at = ih * wd + iw;
                }
              }
            }
            const int64_t o = (p * oh + oi) * ow + oj;
            val[o] = best;
            idx[o] = at;
          }
        }
      }
    });
  });
}

}  // namespace kernels
}  // namespace streamgrad

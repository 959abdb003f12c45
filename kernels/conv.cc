// im2col and col2im on cpu and sim streams (kernels/nn_kernels.h).
//
// Loops run over (plane, kernel tap, output row) with the output column innermost, so
// the inner loop is a strided copy the compiler vectorises when the stride is 1.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks.h"
#include "kernels/widen.h"
#include "kernels/launch_kernel.h"
#include "kernels/dispatch/strided.h"
#include "kernels/cuda/cuda_kernels.h"
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

// One output row of columns for one (channel, tap): its first `begin` and its last
// (ow - end) columns read the padding; columns [begin, end) read the image row from
// column `first` on, `step` apart. `inside` is false when the whole row is padding.
struct ColumnRow {
  int64_t dst;  // offset of the row in the columns
  int64_t src;  // offset of the first image element read
  int64_t begin, end, step;
  bool inside;
};

// Calls fn(row) for every (image plane, kernel tap, output row), in that order. The taps'
// column ranges and input rows are worked out once per launch, so that the per-row work
// is a short loop with no bounds checks (tools/train's cnn has rows of 14 and 28: the
// per-row overhead is most of the cost).
struct ColumnWalk {
  int64_t batch, channels, height, width, oh, ow;
  Window2d w;

  template <typename Fn>
  void operator()(Fn fn) const {
    const int64_t kh = w.kernel[0], kw = w.kernel[1];
    std::vector<int64_t> col_begin(kw), col_end(kw), col_first(kw), row_in(kh * oh);
    for (int64_t kj = 0; kj < kw; ++kj) {
      int64_t begin = 0, end = ow;
      while (begin < ow && column(begin, kj) < 0) ++begin;
      while (end > begin && column(end - 1, kj) >= width) --end;
      col_begin[kj] = begin;
      col_end[kj] = end;
      col_first[kj] = begin < end ? column(begin, kj) : 0;
    }
    for (int64_t ki = 0; ki < kh; ++ki) {
      for (int64_t oi = 0; oi < oh; ++oi) {
        row_in[ki * oh + oi] = window_input_index(oi, ki, w.stride[0], w.padding[0], w.dilation[0]);
      }
    }
    ColumnRow r;
    r.step = w.stride[1];
    r.dst = 0;
    for (int64_t plane = 0; plane < batch * channels; ++plane) {
      const int64_t image = plane * height * width;
      for (int64_t ki = 0; ki < kh; ++ki) {
        for (int64_t kj = 0; kj < kw; ++kj) {
          r.begin = col_begin[kj];
          r.end = col_end[kj];
          for (int64_t oi = 0; oi < oh; ++oi, r.dst += ow) {
            const int64_t ih = row_in[ki * oh + oi];
            r.inside = ih >= 0 && ih < height && r.begin < r.end;
            r.src = image + ih * width + col_first[kj];
            fn(r);
          }
        }
      }
    }
  }

 private:
  int64_t column(int64_t oj, int64_t kj) const {
    return window_input_index(oj, kj, w.stride[1], w.padding[1], w.dilation[1]);
  }
};

// dst[j] += src[j]: the two are disjoint (check_columns), which the compiler is told so
// that the loop is vector code without an alias check.
template <typename T>
void add_row(T* __restrict dst, const T* __restrict src, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
}

template <typename T>
void copy_row(T* __restrict dst, const T* __restrict src, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = src[j];
}

// T{}: zero bits, which is +0 in every floating format (Half and BFloat16 included).
template <typename T>
void zero_row(T* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = T{};
}

ColumnWalk walk_of(const View& image, const View& cols, const Window2d& w) {
  const int64_t oh = out_size(w, 0, image.sizes[2]);
  return {image.sizes[0], image.sizes[1], image.sizes[2], image.sizes[3], oh,
          oh == 0 ? 0 : cols.sizes[2] / oh, w};
}

ImageShape shape_of(const ColumnWalk& c) {
  return {c.batch, c.channels, c.height, c.width, c.oh, c.ow};
}

}  // namespace

void im2col(const Stream& stream, const View& cols, const View& in, const Window2d& w) {
  // Only moves elements: no float32 copy of a 16-bit image or its columns (widen.h).
  if (cpu::widen_to_move(stream, {&cols, &in})) {
    cpu::Widen wide(stream, "im2col");
    im2col(stream, wide.out(cols), wide.in(in), w);
    return wide.finish();
  }
  const char* name = "im2col";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  check_columns(name, cols, in, w);
  if (cols.numel() == 0) return;
  const ColumnWalk walk = walk_of(in, cols, w);
  void* o = cols.data;
  const void* x = in.data;
  cpu::launch_kernel_or_cuda(stream, name, {&in}, {&cols}, [walk, o, x, dt = in.dtype] {
    cpu::dispatch_all(dt, [&](auto t) {
      using T = decltype(t);
      T* out = static_cast<T*>(o);
      const T* img = static_cast<const T*>(x);
      const int64_t ow = walk.ow;
      walk([&](const ColumnRow& r) {
        T* dst = out + r.dst;
        if (!r.inside) {
          zero_row(dst, ow);
          return;
        }
        zero_row(dst, r.begin);
        zero_row(dst + r.end, ow - r.end);
        const T* src = img + r.src;
        if (r.step == 1) {
          copy_row(dst + r.begin, src, r.end - r.begin);
        } else {
          for (int64_t oj = r.begin; oj < r.end; ++oj) dst[oj] = src[(oj - r.begin) * r.step];
        }
      });
    });
  }, [stream, s = shape_of(walk), w, o, x, dt = in.dtype] {
    cuda::im2col(stream, dt, s, w, o, x);
  });
}

void col2im(const Stream& stream, const View& out, const View& cols, const Window2d& w) {
  if (cpu::Widen::applies({&out, &cols})) {
    // A large batch is folded in chunks of images, each widened on its own.
    const int64_t items = out.dim() == 4 && cols.dim() == 3 && cols.sizes[0] == out.sizes[0]
                              ? out.sizes[0] : 0;
    const int64_t chunk =
        items > 0 ? cpu::batch_chunk((out.numel() + cols.numel()) / items) : 0;
    if (items > 0 && chunk < items) {
      for (int64_t i = 0; i < items; i += chunk) {
        const int64_t n = std::min(chunk, items - i);
        col2im(stream, cpu::batch_slice(out, i, n), cpu::batch_slice(cols, i, n), w);
      }
      return;
    }
    cpu::Widen wide(stream, "col2im");
    col2im(stream, wide.out(out, /*keep_values=*/true), wide.in(cols), w);
    return wide.finish();
  }
  const char* name = "col2im";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  check_columns(name, cols, out, w);
  cpu::check_output(name, "out", out);
  if (cols.numel() == 0) return;
  const ColumnWalk walk = walk_of(out, cols, w);
  void* o = out.data;
  const void* x = cols.data;
  cpu::launch_kernel_or_cuda(stream, name, {&cols, &out}, {&out}, [walk, o, x,
                                                                   dt = out.dtype] {
    cpu::dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      T* img = static_cast<T*>(o);
      const T* in = static_cast<const T*>(x);
      // One thread in a fixed order: overlapping windows sum deterministically.
      walk([&](const ColumnRow& r) {
        if (!r.inside) return;
        const T* src = in + r.dst + r.begin;
        T* dst = img + r.src;
        if (r.step == 1) {
          add_row(dst, src, r.end - r.begin);
        } else {
          for (int64_t oj = 0; oj < r.end - r.begin; ++oj) dst[oj * r.step] += src[oj];
        }
      });
    });
  }, [stream, s = shape_of(walk), w, o, x, dt = out.dtype] {
    cuda::col2im(stream, dt, s, w, o, x);
  });
}

}  // namespace kernels
}  // namespace streamgrad

// im2col and col2im on the host (kernels/nn_kernels.h).
//
// Loops run over (plane, kernel tap, output row) with the output column innermost, so
// the inner loop is a strided copy the compiler vectorises when the stride is 1.
#include <cstdint>
#include <vector>

#include "kernels/host/host_kernels.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

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

ColumnWalk walk_of(const ImageShape& s, const Window2d& w) {
  return {s.batch, s.channels, s.height, s.width, s.oh, s.ow, w};
}

}  // namespace

void im2col(const Stream& stream, const LaunchSpec& spec, DType dt, const ImageShape& shape,
            const Window2d& window, void* o, const void* x) {
  dispatch::enqueue(
      stream, spec,
      [o, x, dt](const ColumnWalk& walk) {
        dispatch_all(dt, [&](auto t) {
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
      },
      walk_of(shape, window));
}

void col2im(const Stream& stream, const LaunchSpec& spec, DType dt, const ImageShape& shape,
            const Window2d& window, void* o, const void* x) {
  dispatch::enqueue(
      stream, spec,
      [o, x, dt](const ColumnWalk& walk) {
        dispatch_floating(dt, [&](auto t) {
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
      },
      walk_of(shape, window));
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

// fill, copy (with dtype conversion) and arange on the host. fill and copy run the loops
// of the level in use (loops_copy.cc), split over threads above kParallelGrain elements; a
// 2-D transposing copy runs here, in cache-sized tiles, on one thread.
#include <algorithm>
#include <cstdint>

#include "kernels/functors/convert.h"
#include "kernels/functors/elementwise_ops.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/launch_loop.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// Whether copy_transposed applies: out contiguous along rows, in along columns.
bool is_transpose(const Layout<2>& l) {
  return l.ndim == 2 && l.strides[0][1] == 1 && l.strides[1][0] == 1;
}

// A 2-D transpose copied row by row would touch a new cache line of `in` per element;
// 32 x 32 tiles keep both sides in cache.
template <typename To, typename From>
void copy_transposed(const Layout<2>& l, void* out, const void* in) {
  To* o = static_cast<To*>(out);
  const From* x = static_cast<const From*>(in);
  constexpr int64_t kTile = 32;
  const int64_t rows = l.sizes[0], cols = l.sizes[1];
  const int64_t so = l.strides[0][0], sx = l.strides[1][1];
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) o[i * so + j] = convert<To>(x[i + j * sx]);
      }
    }
  }
}

}  // namespace

void fill(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& layout,
          void* o, double value) {
  launch_loop(stream, spec, layout,
              [dt, o, value](const Loops& loops, const Layout<1>& l, int64_t b, int64_t e) {
                loops.fill(dt, l, o, value, b, e);
              });
}

void copy(const Stream& stream, const LaunchSpec& spec, DType dto, DType dti,
          const Layout<2>& layout, void* o, const void* x) {
  if (is_transpose(layout)) {
    dispatch::enqueue(
        stream, spec,
        [o, x, dto, dti](const Layout<2>& l) {
          dispatch_all(dto, [&](auto to) {
            dispatch_all(dti,
                         [&](auto from) { copy_transposed<decltype(to), decltype(from)>(l, o, x); });
          });
        },
        layout);
    return;
  }
  launch_loop(stream, spec, layout,
              [dto, dti, o, x](const Loops& loops, const Layout<2>& l, int64_t b, int64_t e) {
                loops.copy(dto, dti, l, o, x, b, e);
              });
}

void arange(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& layout,
            void* o, double start, double step) {
  dispatch::enqueue(
      stream, spec,
      [o, dt, start, step](const Layout<1>& l) {
        dispatch_any(dt, [&](auto t) {
          using T = decltype(t);
          T* o0 = static_cast<T*>(o);
          const ArangeOp<T> value{start, step};
          uint64_t i = 0;
          for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* st) {
            for (int64_t j = 0; j < n; ++j, ++i) o0[off[0] + j * st[0]] = value(i);
          });
        });
      },
      layout);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

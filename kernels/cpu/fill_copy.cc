// fill, copy (with dtype conversion) and arange. fill and copy run the loops of the level
// in use (kernels/cpu/loops_copy.cc), split over threads above kParallelGrain elements; a
// 2-D transposing copy runs here, in cache-sized tiles, on one thread.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/widen.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/launch_kernel.h"
#include "kernels/cpu/strided.h"
#include "kernels/cuda_kernels.h"
#include "kernels/elementwise_ops.h"
#include "kernels/kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

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
        for (int64_t j = j0; j < j1; ++j) o[i * so + j] = cpu::convert<To>(x[i + j * sx]);
      }
    }
  }
}

Layout<1> out_layout(const View& out) {
  return cpu::make_layout<1>(out.sizes, {out.strides.data()});
}

}  // namespace

void fill(const Stream& stream, const View& out, double value) {
  const char* name = "fill";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  cpu::check_output(name, "out", out);
  if (out.dtype == DType::kInt64) {
    SG_CHECK(in_int64_range(value), ValueError, name,
             ": value ", value, " does not fit in int64 (out is ", cpu::describe(out), ")");
  }
  const Layout<1> l = out_layout(out);
  if (l.numel == 0) return;
  void* o = out.data;
  const DType dt = out.dtype;
  cpu::launch_loop_or_cuda(
      stream, name, {}, {&out}, l,
      [dt, o, value](const cpu::Loops& loops, const Layout<1>& l, int64_t b, int64_t e) {
        loops.fill(dt, l, o, value, b, e);
      },
      [stream, dt, o, value](const Layout<1>& l) { cuda::fill(stream, dt, l, o, value); });
}

void copy(const Stream& stream, const View& out, const View& in) {
  const char* name = "copy";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  cpu::check_output(name, "out", out);
  cpu::check_view(name, "in", in);
  cpu::check_same_sizes(name, "out", out, "in", in);
  cpu::check_no_partial_overlap(name, "out", out, "in", in);
  const Layout<2> l = cpu::make_layout<2>(out.sizes, {out.strides.data(), in.strides.data()});
  if (l.numel == 0) return;
  void* o = out.data;
  const void* x = in.data;
  const DType dto = out.dtype, dti = in.dtype;
  if (is_transpose(l) && stream.device().type() != DeviceType::kCuda) {
    cpu::launch_kernel(
        stream, name, {&in}, {&out},
        [o, x, dto, dti](const Layout<2>& l) {
          cpu::dispatch_all(dto, [&](auto to) {
            cpu::dispatch_all(
                dti, [&](auto from) { copy_transposed<decltype(to), decltype(from)>(l, o, x); });
          });
        },
        l);
    return;
  }
  cpu::launch_loop_or_cuda(
      stream, name, {&in}, {&out}, l,
      [dto, dti, o, x](const cpu::Loops& loops, const Layout<2>& l, int64_t b, int64_t e) {
        loops.copy(dto, dti, l, o, x, b, e);
      },
      [stream, dto, dti, o, x](const Layout<2>& l) { cuda::copy(stream, dto, dti, l, o, x); });
}

void arange(const Stream& stream, const View& out, double start, double step) {
  if (cpu::Widen::applies({&out})) {
    cpu::Widen w(stream, "arange");
    arange(stream, w.out(out), start, step);
    return w.finish();
  }
  const char* name = "arange";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  cpu::check_output(name, "out", out);
  SG_CHECK(out.dtype != DType::kBool, ValueError, name, ": out is ", cpu::describe(out),
           "; expected float32, float64 or int64");
  if (out.dtype == DType::kInt64) {
    // Integer ranges are computed in int64, exactly, so they must start and step on
    // integers.
    SG_CHECK(std::abs(start) < kInt64Bound && std::abs(step) < kInt64Bound &&
                 std::trunc(start) == start && std::trunc(step) == step,
             ValueError, name, ": start ", start, " and step ", step,
             " must be integers in int64 range for an int64 out");
    const double last = std::abs(start) + std::abs(step) * static_cast<double>(out.numel());
    SG_CHECK(last < kInt64Bound, ValueError, name, ": start ", start, " + step ", step, " * ",
             out.numel(), " elements overflows int64");
  }
  // Any strides work: the layout is walked in row-major order, so the running counter is
  // the flat index the contract speaks of.
  const Layout<1> l = out_layout(out);
  if (l.numel == 0) return;
  void* o = out.data;
  const DType dt = out.dtype;
  cpu::launch_kernel_or_cuda(
      stream, name, {}, {&out},
      [o, dt, start, step](const Layout<1>& l) {
        cpu::dispatch_any(dt, [&](auto t) {
          using T = decltype(t);
          T* o0 = static_cast<T*>(o);
          const ArangeOp<T> value{start, step};
          uint64_t i = 0;
          cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* st) {
            for (int64_t j = 0; j < n; ++j, ++i) o0[off[0] + j * st[0]] = value(i);
          });
        });
      },
      [stream, o, dt, start, step](const Layout<1>& l) {
        cuda::arange(stream, dt, l, o, start, step);
      },
      l);
}

}  // namespace kernels
}  // namespace streamgrad

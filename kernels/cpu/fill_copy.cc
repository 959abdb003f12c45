// fill, copy (with dtype conversion) and arange.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/strided.h"
#include "kernels/kernels.h"
#include "runtime/error.h"
#include "runtime/launch.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

// 2^63 as a double: the first value above int64's range.
constexpr double kTwo63 = 9223372036854775808.0;

// Every conversion is defined: bool is stored as a byte and becomes 0/1; floating to int64
// truncates toward zero, saturates at the int64 range and maps NaN to 0 (C++ leaves those
// undefined, and a kernel must not be).
template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same<To, uint8_t>::value) {
    return v != From(0) ? 1 : 0;
  } else if constexpr (std::is_same<From, uint8_t>::value) {
    return v != 0 ? To(1) : To(0);
  } else if constexpr (std::is_same<To, int64_t>::value && std::is_floating_point<From>::value) {
    if (!(v == v)) return 0;
    if (v >= kTwo63) return std::numeric_limits<int64_t>::max();
    if (v < -kTwo63) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(v);
  } else {
    return static_cast<To>(v);
  }
}

template <typename T>
void fill_rows(const Layout<1>& l, void* out, T value) {
  T* o0 = static_cast<T*>(out);
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    if (step[0] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = value;
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * step[0]] = value;
    }
  });
}

// A 2-D transpose (out contiguous along rows, in along columns) copied row by row would
// touch a new cache line of `in` per element; 32 x 32 tiles keep both sides in cache.
template <typename To, typename From>
bool copy_transposed(const Layout<2>& l, To* o, const From* x) {
  if (l.ndim != 2 || l.strides[0][1] != 1 || l.strides[1][0] != 1) return false;
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
  return true;
}

template <typename To, typename From>
void copy_rows(const Layout<2>& l, void* out, const void* in) {
  To* o0 = static_cast<To*>(out);
  const From* x0 = static_cast<const From*>(in);
  if (copy_transposed(l, o0, x0)) return;
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    To* o = o0 + off[0];
    const From* x = x0 + off[1];
    if (std::is_same<To, From>::value && step[0] == 1 && step[1] == 1) {
      if (static_cast<const void*>(o) != static_cast<const void*>(x)) {
        std::memcpy(o, x, static_cast<size_t>(n) * sizeof(To));
      }
    } else if (step[0] == 1 && step[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = convert<To>(x[i]);
    } else {
      const int64_t so = step[0], sx = step[1];
      for (int64_t i = 0; i < n; ++i) o[i * so] = convert<To>(x[i * sx]);
    }
  });
}

Layout<1> out_layout(const View& out) {
  return cpu::make_layout<1>(out.sizes, {out.strides.data()});
}

}  // namespace

void fill(const Stream& stream, const View& out, double value) {
  const char* name = "fill";
  cpu::check_stream(name, stream);
  cpu::check_output(name, "out", out);
  if (out.dtype == DType::kInt64) {
    SG_CHECK(std::isfinite(value) && value >= -kTwo63 && value < kTwo63, ValueError, name,
             ": value ", value, " does not fit in int64 (out is ", cpu::describe(out), ")");
  }
  const Layout<1> l = out_layout(out);
  if (l.numel == 0) return;
  const MemRange writes[] = {out.byte_range()};
  void* o = out.data;
  const DType dt = out.dtype;
  launch(stream, {name, {}, writes}, [l, o, dt, value] {
    cpu::dispatch_any(dt, [&](auto t) {
      using T = decltype(t);
      fill_rows<T>(l, o, convert<T>(value));
    });
  });
}

void copy(const Stream& stream, const View& out, const View& in) {
  const char* name = "copy";
  cpu::check_stream(name, stream);
  cpu::check_output(name, "out", out);
  cpu::check_view(name, "in", in);
  cpu::check_same_sizes(name, "out", out, "in", in);
  cpu::check_no_partial_overlap(name, "out", out, "in", in);
  const Layout<2> l = cpu::make_layout<2>(out.sizes, {out.strides.data(), in.strides.data()});
  if (l.numel == 0) return;
  const MemRange reads[] = {in.byte_range()};
  const MemRange writes[] = {out.byte_range()};
  void* o = out.data;
  const void* x = in.data;
  const DType dto = out.dtype, dti = in.dtype;
  launch(stream, {name, reads, writes}, [l, o, x, dto, dti] {
    cpu::dispatch_any(dto, [&](auto to) {
      cpu::dispatch_any(dti, [&](auto from) {
        copy_rows<decltype(to), decltype(from)>(l, o, x);
      });
    });
  });
}

void arange(const Stream& stream, const View& out, double start, double step) {
  const char* name = "arange";
  cpu::check_stream(name, stream);
  cpu::check_output(name, "out", out);
  SG_CHECK(out.dtype != DType::kBool, ValueError, name, ": out is ", cpu::describe(out),
           "; expected float32, float64 or int64");
  if (out.dtype == DType::kInt64) {
    // Integer ranges are computed in int64, exactly, so they must start and step on
    // integers.
    SG_CHECK(std::abs(start) < kTwo63 && std::abs(step) < kTwo63 &&
                 std::trunc(start) == start && std::trunc(step) == step,
             ValueError, name, ": start ", start, " and step ", step,
             " must be integers in int64 range for an int64 out");
    const double last = std::abs(start) + std::abs(step) * static_cast<double>(out.numel());
    SG_CHECK(last < kTwo63, ValueError, name, ": start ", start, " + step ", step, " * ",
             out.numel(), " elements overflows int64");
  }
  // Any strides work: the layout is walked in row-major order, so the running counter is
  // the flat index the contract speaks of.
  const Layout<1> l = out_layout(out);
  if (l.numel == 0) return;
  const MemRange writes[] = {out.byte_range()};
  void* o = out.data;
  const DType dt = out.dtype;
  launch(stream, {name, {}, writes}, [l, o, dt, start, step] {
    cpu::dispatch_any(dt, [&](auto t) {
      using T = decltype(t);
      T* o0 = static_cast<T*>(o);
      int64_t i = 0;
      cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* st) {
        for (int64_t j = 0; j < n; ++j, ++i) {
          if constexpr (std::is_same<T, int64_t>::value) {
            o0[off[0] + j * st[0]] =
                static_cast<int64_t>(start) + i * static_cast<int64_t>(step);
          } else {
            o0[off[0] + j * st[0]] = static_cast<T>(start + static_cast<double>(i) * step);
          }
        }
      });
    });
  });
}

}  // namespace kernels
}  // namespace streamgrad

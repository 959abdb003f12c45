// reduce (sum / max / min over the dims out keeps at size 1) and arg_reduce along a dim.
//
// Each output element owns its accumulator, so sums stay in double for float32 and the
// order of accumulation is fixed. Two walks: per output (kept dims outer, reduced dims an
// inner loop: right for reductions over inner dims), and by columns (a row of
// accumulators filled in `in`'s memory order: right for reductions over outer dims).
#include <limits>
#include <vector>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/strided.h"
#include "kernels/kernels.h"
#include "runtime/error.h"
#include "runtime/launch.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

// Sums accumulate in double whatever T is.
template <typename T>
double sum_over(const Layout<1>& r, const T* base) {
  double acc = 0;
  cpu::for_each_row(r, [&](const int64_t* off, int64_t n, const int64_t* step) {
    const T* p = base + off[0];
    if (step[0] == 1) {
      // Four partial sums break the add-latency chain; the order is still fixed, so
      // results stay deterministic.
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
      }
      for (; i < n; ++i) s0 += p[i];
      acc += (s0 + s1) + (s2 + s3);
    } else {
      for (int64_t i = 0; i < n; ++i) acc += p[i * step[0]];
    }
  });
  return acc;
}

// NaN wins: once the running value is NaN no comparison replaces it.
template <typename T, bool kMax>
T extreme_over(const Layout<1>& r, const T* base) {
  T acc = *base;
  cpu::for_each_row(r, [&](const int64_t* off, int64_t n, const int64_t* step) {
    const T* p = base + off[0];
    for (int64_t i = 0; i < n; ++i) {
      const T v = p[i * step[0]];
      if ((kMax ? v > acc : v < acc) || v != v) acc = v;
    }
  });
  return acc;
}

template <typename T, typename Inner>
void reduce_rows(const Layout<2>& kept, void* out, const void* in, Inner inner) {
  T* o0 = static_cast<T*>(out);
  const T* x0 = static_cast<const T*>(in);
  cpu::for_each_row(kept, [&](const int64_t* off, int64_t n, const int64_t* step) {
    for (int64_t j = 0; j < n; ++j) {
      o0[off[0] + j * step[0]] = static_cast<T>(inner(x0 + off[1] + j * step[1]));
    }
  });
}

// For reductions over outer dims (a bias gradient: [B, N] -> [1, N]) reduce_rows would
// stride across rows of `in` for every output. When each kept row is contiguous in `in`,
// walking it in memory order into a row of accumulators is many times faster.
template <typename T, typename Acc, typename Combine>
void reduce_columns(const Layout<2>& kept, const Layout<1>& red, void* out, const void* in,
                    Acc init, Combine combine) {
  T* o0 = static_cast<T*>(out);
  const T* x0 = static_cast<const T*>(in);
  std::vector<Acc> acc;
  cpu::for_each_row(kept, [&](const int64_t* off, int64_t n, const int64_t* step) {
    acc.assign(static_cast<size_t>(n), init);
    Acc* a = acc.data();
    cpu::for_each_row(red, [&](const int64_t* roff, int64_t rn, const int64_t* rstep) {
      for (int64_t r = 0; r < rn; ++r) {
        const T* row = x0 + off[1] + roff[0] + r * rstep[0];
        for (int64_t j = 0; j < n; ++j) a[j] = combine(a[j], row[j]);
      }
    });
    for (int64_t j = 0; j < n; ++j) o0[off[0] + j * step[0]] = static_cast<T>(a[j]);
  });
}

template <typename T>
void run_reduce(Reduce op, const Layout<2>& kept, const Layout<1>& red, void* o,
                const void* x) {
  const bool columns = kept.ndim > 0 && kept.strides[1][kept.ndim - 1] == 1 &&
                       red.ndim > 0 && red.strides[0][red.ndim - 1] != 1;
  const T inf = std::numeric_limits<T>::infinity();
  // Once a running value is NaN no comparison replaces it.
  auto max = [](T a, T v) { return v > a || v != v ? v : a; };
  auto min = [](T a, T v) { return v < a || v != v ? v : a; };
  switch (op) {
    case Reduce::kSum:
      if (columns) {
        return reduce_columns<T>(kept, red, o, x, 0.0, [](double a, T v) { return a + v; });
      }
      return reduce_rows<T>(kept, o, x, [&](const T* p) { return sum_over(red, p); });
    case Reduce::kMax:
      if (columns) return reduce_columns<T>(kept, red, o, x, -inf, max);
      return reduce_rows<T>(kept, o, x,
                            [&](const T* p) { return extreme_over<T, true>(red, p); });
    case Reduce::kMin:
      if (columns) return reduce_columns<T>(kept, red, o, x, inf, min);
      return reduce_rows<T>(kept, o, x,
                            [&](const T* p) { return extreme_over<T, false>(red, p); });
  }
}

const char* name_of(Reduce op) {
  switch (op) {
    case Reduce::kSum: return "sum";
    case Reduce::kMax: return "max";
    case Reduce::kMin: return "min";
  }
  return "reduce";
}

}  // namespace

void reduce(const Stream& stream, Reduce op, const View& out, const View& in) {
  const char* name = name_of(op);
  cpu::check_stream(name, stream);
  cpu::check_output(name, "out", out);
  cpu::check_view(name, "in", in);
  cpu::check_floating(name, "in", in);
  cpu::check_same_dtype(name, "out", out, "in", in);
  SG_CHECK(out.dim() == in.dim(), ValueError, name, ": out ", cpu::describe(out),
           " must have in's rank (keepdim form) but in is ", cpu::describe(in));
  std::vector<int64_t> reduced_sizes(in.sizes.size());
  for (int64_t d = 0; d < in.dim(); ++d) {
    SG_CHECK(out.sizes[d] == in.sizes[d] || out.sizes[d] == 1, ValueError, name, ": out ",
             cpu::describe(out), " does not match in ", cpu::describe(in), " on dim ", d,
             "; reduced dims have size 1 in out, kept dims in's size");
    reduced_sizes[d] = out.sizes[d] == in.sizes[d] ? 1 : in.sizes[d];
  }
  SG_CHECK(op == Reduce::kSum || in.numel() > 0 || out.numel() == 0, ValueError, name,
           ": in ", cpu::describe(in), " is empty; max and min of an empty set are undefined");
  cpu::check_disjoint(name, "out", out, "in", in);

  // Reduced dims have size 1 in out, so the kept layout drops them by itself.
  const Layout<2> kept = cpu::make_layout<2>(out.sizes, {out.strides.data(), in.strides.data()});
  const Layout<1> red = cpu::make_layout<1>(reduced_sizes, {in.strides.data()});
  if (kept.numel == 0) return;
  const MemRange reads[] = {in.byte_range()};
  const MemRange writes[] = {out.byte_range()};
  void* o = out.data;
  const void* x = in.data;
  const DType dt = out.dtype;
  launch(stream, {name, reads, writes}, [kept, red, op, o, x, dt] {
    cpu::dispatch_floating(dt, [&](auto t) { run_reduce<decltype(t)>(op, kept, red, o, x); });
  });
}

void arg_reduce(const Stream& stream, bool is_max, const View& values, const View& indices,
                const View& in, int64_t dim) {
  const char* name = is_max ? "argmax" : "argmin";
  cpu::check_stream(name, stream);
  cpu::check_output(name, "values", values);
  cpu::check_output(name, "indices", indices);
  cpu::check_view(name, "in", in);
  cpu::check_floating(name, "in", in);
  cpu::check_same_dtype(name, "values", values, "in", in);
  cpu::check_dtype(name, "indices", indices, DType::kInt64);
  cpu::check_dim(name, dim, in);
  std::vector<int64_t> want = in.sizes;
  want[dim] = 1;
  SG_CHECK(values.sizes == want, ValueError, name, ": values ", cpu::describe(values),
           " must be in's sizes with 1 on dim ", dim, "; in is ", cpu::describe(in));
  cpu::check_same_sizes(name, "indices", indices, "values", values);
  const int64_t n = in.sizes[dim];
  SG_CHECK(n > 0 || values.numel() == 0, ValueError, name, ": in ", cpu::describe(in),
           " has no elements along dim ", dim);
  cpu::check_disjoint(name, "values", values, "in", in);
  cpu::check_disjoint(name, "indices", indices, "in", in);
  cpu::check_disjoint(name, "indices", indices, "values", values);

  const Layout<3> l = cpu::make_layout<3>(
      values.sizes, {values.strides.data(), indices.strides.data(), in.strides.data()});
  if (l.numel == 0) return;
  const int64_t stride = in.strides[dim];
  const MemRange reads[] = {in.byte_range()};
  const MemRange writes[] = {values.byte_range(), indices.byte_range()};
  void* pv = values.data;
  void* pi = indices.data;
  const void* px = in.data;
  const DType dt = in.dtype;
  launch(stream, {name, reads, writes}, [l, n, stride, is_max, pv, pi, px, dt] {
    cpu::dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      T* v0 = static_cast<T*>(pv);
      int64_t* i0 = static_cast<int64_t*>(pi);
      const T* x0 = static_cast<const T*>(px);
      cpu::for_each_row(l, [&](const int64_t* off, int64_t rows, const int64_t* step) {
        for (int64_t j = 0; j < rows; ++j) {
          const T* x = x0 + off[2] + j * step[2];
          T best = x[0];
          int64_t at = 0;
          // Strict comparisons keep the first of equal values; the first NaN wins and
          // nothing replaces it.
          for (int64_t k = 1; k < n && best == best; ++k) {
            const T v = x[k * stride];
            if ((is_max ? v > best : v < best) || v != v) {
              best = v;
              at = k;
            }
          }
          v0[off[0] + j * step[0]] = best;
          i0[off[1] + j * step[1]] = at;
        }
      });
    });
  });
}

}  // namespace kernels
}  // namespace streamgrad

// index_select, index_add, scatter_add and gather, and check_index_range (the same
// validation under a caller's name).
//
// Indices are validated in full before the first element is touched, so a bad index
// never reads or writes out of bounds and never leaves a half-updated out. On cpu the
// check runs on the host before launching (the cpu stream has no pending work, so the
// index memory is final); on sim it runs inside the task and its ValueError surfaces at
// the stream's next synchronisation.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks.h"
#include "kernels/widen.h"
#include "kernels/launch_kernel.h"
#include "kernels/dispatch/strided.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

// What a task needs to validate its indices.
struct IndexCheck {
  const char* kernel;
  Layout<1> layout;  // the index view's own layout
  const int64_t* data;
  int64_t dim;
  int64_t limit;  // valid indices are [0, limit)
};

void check_indices(const IndexCheck& c) {
  int64_t position = 0;
  cpu::for_each_row(c.layout, [&](const int64_t* off, int64_t n, const int64_t* step) {
    const int64_t* p = c.data + off[0];
    for (int64_t j = 0; j < n; ++j, ++position) {
      const int64_t v = p[j * step[0]];
      SG_CHECK(v >= 0 && v < c.limit, ValueError, c.kernel, ": index ", v,
               " (element ", position, " of index, row-major) is out of range for dim ",
               c.dim, " of size ", c.limit, "; valid indices are 0..", c.limit - 1);
    }
  });
}

// The cuda kernels' arguments for the same launch (they check the indices on the device).
IndexArgs cuda_args(const IndexCheck& c, const Layout<3>& l, void* out, const void* other,
                          int64_t step) {
  return {c.kernel, l, out, other, c.data, step, c.layout, c.dim, c.limit};
}

IndexCheck make_check(const char* kernel, const View& index, int64_t dim, int64_t limit) {
  return {kernel, cpu::make_layout<1>(index.sizes, {index.strides.data()}),
          static_cast<const int64_t*>(index.data), dim, limit};
}

// Operand strides for a walk over `sizes` in which `dim` is addressed through the index:
// `target` moves along every dim but `dim`, and the index view moves along `dim` only
// (1-D index) or along all dims (index shaped like the walk).
std::vector<int64_t> without_dim(const View& v, int64_t dim) {
  std::vector<int64_t> s = v.strides;
  s[dim] = 0;
  return s;
}

std::vector<int64_t> index_along(const View& index, int64_t rank, int64_t dim) {
  std::vector<int64_t> s(rank, 0);
  s[dim] = index.strides[0];
  return s;
}

// Walks `l` (operands: target, other, index) and calls fn(target_offset, other_offset,
// index_value) per element; the caller scales the index by the target's dim stride.
template <typename Fn>
void indexed_walk(const Layout<3>& l, const int64_t* idx, Fn fn) {
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    for (int64_t j = 0; j < n; ++j) {
      fn(off[0] + j * step[0], off[1] + j * step[1], idx[off[2] + j * step[2]]);
    }
  });
}

void check_common(const char* name, const Stream& stream, const View& out,
                  const View& other, const char* other_name, const View& index, int64_t dim) {
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  cpu::check_output(name, "out", out);
  cpu::check_view(name, other_name, other);
  cpu::check_view(name, "index", index);
  cpu::check_dtype(name, "index", index, DType::kInt64);
  cpu::check_same_dtype(name, "out", out, other_name, other);
  SG_CHECK(out.dim() == other.dim(), ValueError, name, ": out ", cpu::describe(out),
           " and ", other_name, " ", cpu::describe(other), " must have the same rank");
  cpu::check_dim(name, dim, out);
  cpu::check_disjoint(name, "out", out, other_name, other);
  cpu::check_disjoint(name, "out", out, "index", index);
}

// out and other agree on every dim but `dim`, where other has index.numel() entries
// (index_add) or out has them (index_select).
void check_one_d(const char* name, const View& out, const View& other,
                 const char* other_name, const View& index, int64_t dim, const View& along) {
  SG_CHECK(index.dim() == 1, ValueError, name, ": index ", cpu::describe(index),
           " must be 1-D");
  bool ok = along.sizes[dim] == index.numel();
  for (int64_t d = 0; d < out.dim(); ++d) ok = ok && (d == dim || out.sizes[d] == other.sizes[d]);
  SG_CHECK(ok, ValueError, name, ": out ", cpu::describe(out), ", ", other_name, " ",
           cpu::describe(other), " and index ", cpu::describe(index),
           " do not fit: sizes must agree except on dim ", dim,
           ", where the indexed side has index.numel() entries");
}

// out[o] = in[o's position with index[i] along dim] over layout l (out, in without dim,
// index): index_select's and gather's shared body. Indices are checked on the host for
// cpu streams, in the work itself elsewhere.
void read_indexed(const Stream& stream, const char* name, const View& out, const View& in,
                  const View& index, int64_t dim, const IndexCheck& chk, const Layout<3>& l) {
  if (l.numel == 0) return;
  const bool host_checked = stream.device().is_cpu();
  if (host_checked) check_indices(chk);
  void* o = out.data;
  const void* x = in.data;
  const int64_t sd = in.strides[dim];
  const DType dt = out.dtype;
  cpu::launch_kernel_or_cuda(
      stream, name, {&in, &index}, {&out},
      [chk, host_checked, o, x, sd, dt](const Layout<3>& l) {
        if (!host_checked) check_indices(chk);
        cpu::dispatch_all(dt, [&](auto t) {
          using T = decltype(t);
          T* o0 = static_cast<T*>(o);
          const T* x0 = static_cast<const T*>(x);
          indexed_walk(l, chk.data,
                       [&](int64_t oo, int64_t xo, int64_t i) { o0[oo] = x0[xo + i * sd]; });
        });
      },
      [stream, chk, o, x, sd, dt](const Layout<3>& l) {
        cuda::index_read(stream, dt, cuda_args(chk, l, o, x, sd));
      },
      l);
}

}  // namespace

void index_select(const Stream& stream, const View& out, const View& in, int64_t dim,
                  const View& index) {
  if (cpu::widen_to_move(stream, {&out, &in})) {
    cpu::Widen w(stream, "index_select");
    index_select(stream, w.out(out), w.in(in), dim, index);
    return w.finish();
  }
  const char* name = "index_select";
  check_common(name, stream, out, in, "in", index, dim);
  check_one_d(name, out, in, "in", index, dim, out);
  const IndexCheck chk = make_check(name, index, dim, in.sizes[dim]);
  const std::vector<int64_t> in_strides = without_dim(in, dim);
  const std::vector<int64_t> idx_strides = index_along(index, out.dim(), dim);
  const Layout<3> l = cpu::make_layout<3>(
      out.sizes, {out.strides.data(), in_strides.data(), idx_strides.data()});
  read_indexed(stream, name, out, in, index, dim, chk, l);
}

namespace {

// The shared body of index_add and scatter_add: out[walk] += src, indices checked on
// the host for cpu and inside the task for sim (before anything is written).
void accumulate_indexed(const Stream& stream, const char* name, const View& out,
                        const View& src, const View& index, int64_t dim,
                        const IndexCheck& chk, const Layout<3>& l) {
  if (l.numel == 0) return;
  const bool host_checked = stream.device().is_cpu();
  if (host_checked) check_indices(chk);
  void* o = out.data;
  const void* s = src.data;
  const int64_t sd = out.strides[dim];
  const DType dt = out.dtype;
  cpu::launch_kernel_or_cuda(
      stream, name, {&out, &src, &index}, {&out},
      [chk, host_checked, o, s, sd, dt](const Layout<3>& l) {
        if (!host_checked) check_indices(chk);
        cpu::dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          T* o0 = static_cast<T*>(o);
          const T* s0 = static_cast<const T*>(s);
          // One thread in a fixed order: duplicates accumulate deterministically.
          indexed_walk(l, chk.data,
                       [&](int64_t oo, int64_t so, int64_t i) { o0[oo + i * sd] += s0[so]; });
        });
      },
      [stream, chk, o, s, sd, dt](const Layout<3>& l) {
        cuda::index_accumulate(stream, dt, cuda_args(chk, l, o, s, sd));
      },
      l);
}

}  // namespace

void index_add(const Stream& stream, const View& out, int64_t dim, const View& index,
               const View& src) {
  if (cpu::Widen::applies({&out, &src})) {
    cpu::Widen w(stream, "index_add");
    index_add(stream, w.out(out, /*keep_values=*/true), dim, index, w.in(src));
    return w.finish();
  }
  const char* name = "index_add";
  check_common(name, stream, out, src, "src", index, dim);
  cpu::check_floating(name, "out", out);
  check_one_d(name, out, src, "src", index, dim, src);
  const IndexCheck chk = make_check(name, index, dim, out.sizes[dim]);
  const std::vector<int64_t> out_strides = without_dim(out, dim);
  const std::vector<int64_t> idx_strides = index_along(index, src.dim(), dim);
  accumulate_indexed(stream, name, out, src, index, dim, chk,
                     cpu::make_layout<3>(src.sizes, {out_strides.data(), src.strides.data(),
                                                     idx_strides.data()}));
}

void scatter_add(const Stream& stream, const View& out, int64_t dim, const View& index,
                 const View& src) {
  if (cpu::Widen::applies({&out, &src})) {
    cpu::Widen w(stream, "scatter_add");
    scatter_add(stream, w.out(out, /*keep_values=*/true), dim, index, w.in(src));
    return w.finish();
  }
  const char* name = "scatter_add";
  check_common(name, stream, out, src, "src", index, dim);
  cpu::check_floating(name, "out", out);
  cpu::check_same_sizes(name, "index", index, "src", src);
  bool fits = true;
  for (int64_t d = 0; d < out.dim(); ++d) fits = fits && (d == dim || src.sizes[d] <= out.sizes[d]);
  SG_CHECK(fits, ValueError, name, ": src ", cpu::describe(src), " is larger than out ",
           cpu::describe(out), " on a dim other than ", dim);
  const IndexCheck chk = make_check(name, index, dim, out.sizes[dim]);
  const std::vector<int64_t> out_strides = without_dim(out, dim);
  accumulate_indexed(stream, name, out, src, index, dim, chk,
                     cpu::make_layout<3>(src.sizes, {out_strides.data(), src.strides.data(),
                                                     index.strides.data()}));
}

void gather(const Stream& stream, const View& out, const View& in, int64_t dim,
            const View& index) {
  if (cpu::widen_to_move(stream, {&out, &in})) {
    cpu::Widen w(stream, "gather");
    gather(stream, w.out(out), w.in(in), dim, index);
    return w.finish();
  }
  const char* name = "gather";
  check_common(name, stream, out, in, "in", index, dim);
  cpu::check_same_sizes(name, "index", index, "out", out);
  bool fits = true;
  for (int64_t d = 0; d < out.dim(); ++d) fits = fits && (d == dim || out.sizes[d] <= in.sizes[d]);
  SG_CHECK(fits, ValueError, name, ": out ", cpu::describe(out), " is larger than in ",
           cpu::describe(in), " on a dim other than ", dim);
  const IndexCheck chk = make_check(name, index, dim, in.sizes[dim]);
  const std::vector<int64_t> in_strides = without_dim(in, dim);
  const Layout<3> l = cpu::make_layout<3>(
      out.sizes, {out.strides.data(), in_strides.data(), index.strides.data()});
  read_indexed(stream, name, out, in, index, dim, chk, l);
}

namespace {

// The first element of `layout` over `data` outside [0, limit): its row-major position
// and value; false when there is none.
bool first_bad(const Layout<1>& layout, const int64_t* data, int64_t limit, int64_t* position,
               int64_t* value) {
  int64_t at = 0;
  bool found = false;
  cpu::for_each_row(layout, [&](const int64_t* off, int64_t n, const int64_t* step) {
    for (int64_t j = 0; j < n && !found; ++j, ++at) {
      const int64_t v = data[off[0] + j * step[0]];
      if (v < 0 || v >= limit) {
        *position = at;
        *value = v;
        found = true;
      }
    }
  });
  return found;
}

[[noreturn]] void report_range(const std::string& context, int64_t limit, int64_t position,
                               int64_t value) {
  throw ValueError(absl::StrCat(context, "; element ", position, " (row-major) is ", value,
                                ", out of range 0..", limit - 1));
}

}  // namespace

void check_index_range(const Stream& stream, const View& index, int64_t limit,
                       const std::string& context) {
  const char* name = "check_index_range";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  cpu::check_view(name, "index", index);
  cpu::check_dtype(name, "index", index, DType::kInt64);
  if (index.numel() == 0) return;
  const Layout<1> layout = cpu::make_layout<1>(index.sizes, {index.strides.data()});
  const int64_t* data = static_cast<const int64_t*>(index.data);
  int64_t position = 0, value = 0;
  if (stream.device().is_cpu()) {
    // The cpu stream has no pending work: the index memory is final, nothing to enqueue.
    if (first_bad(layout, data, limit, &position, &value)) {
      report_range(context, limit, position, value);
    }
    return;
  }
  cpu::launch_kernel_or_cuda(
      stream, name, {&index}, {},
      [context, limit, data](const Layout<1>& l) {
        int64_t at = 0, v = 0;
        if (first_bad(l, data, limit, &at, &v)) report_range(context, limit, at, v);
      },
      [stream, context, limit, data](const Layout<1>& l) {
        int64_t at = 0, v = 0;
        if (cuda::first_bad_index(stream, "check_index_range", l, data, limit, &at, &v)) {
          report_range(context, limit, at, v);
        }
      },
      layout);
}

}  // namespace kernels
}  // namespace streamgrad

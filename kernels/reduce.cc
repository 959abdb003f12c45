// reduce (sum / max / min over the dims out keeps at size 1), arg_reduce and cumsum along
// a dim: the front door. Checks here, then the implementation registered for the stream's device
// (kernels/host/reduce.cc on cpu and sim, kernels/cuda/reduce.cu on cuda); 16-bit views
// are reduced in float32 (sums in double, cumsum's running sums too).
#include <type_traits>
#include <vector>

#include "kernels/checks.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/dispatch/strided.h"
#include "kernels/front.h"
#include "kernels/kernels.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;
using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Operands;

const char* name_of(Reduce op) {
  switch (op) {
    case Reduce::kSum: return "sum";
    case Reduce::kMax: return "max";
    case Reduce::kMin: return "min";
  }
  return "reduce";
}

// reduce on the views to compute on (16-bit ones already widened).
void reduce_views(const dispatch::Impl<KernelId::kReduce>& impl, const Stream& stream,
                  Reduce op, const char* name, const View& out, const View& in) {
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
  impl.fn(stream, LaunchSpec(name, {&in}, {&out}), op, out.dtype, kept, red, out.data,
          in.data);
}

void arg_reduce_views(const dispatch::Impl<KernelId::kArgReduce>& impl, const Stream& stream,
                      bool is_max, const char* name, const View& values, const View& indices,
                      const View& in, int64_t dim) {
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
  impl.fn(stream, LaunchSpec(name, {&in}, {&values, &indices}), is_max, in.dtype, l, n,
          stride, values.data, static_cast<int64_t*>(indices.data), in.data);
}

// `p` moved by `elements` elements of dtype `dt`.
template <typename P>
P* moved(P* p, DType dt, int64_t elements) {
  using Byte = std::conditional_t<std::is_const<P>::value, const char, char>;
  return reinterpret_cast<P*>(reinterpret_cast<Byte*>(p) +
                              elements * static_cast<int64_t>(element_size(dt)));
}

void cumsum_views(const dispatch::Impl<KernelId::kCumsum>& impl, const Stream& stream,
                  const View& out, const View& in, int64_t dim, bool reverse) {
  const char* name = "cumsum";
  cpu::check_output(name, "out", out);
  cpu::check_view(name, "in", in);
  cpu::check_floating(name, "in", in);
  cpu::check_same_dtype(name, "out", out, "in", in);
  cpu::check_same_sizes(name, "out", out, "in", in);
  cpu::check_dim(name, dim, in);
  cpu::check_disjoint(name, "out", out, "in", in);
  // The lines: every dim but `dim`, which each line walks itself.
  std::vector<int64_t> line_sizes = out.sizes;
  line_sizes[dim] = 1;
  const Layout<2> lines =
      cpu::make_layout<2>(line_sizes, {out.strides.data(), in.strides.data()});
  const int64_t n = in.sizes[dim];
  if (lines.numel == 0 || n == 0) return;
  const int64_t os = out.strides[dim], is = in.strides[dim];
  if (!reverse) {
    impl.fn(stream, LaunchSpec(name, {&in}, {&out}), in.dtype, lines, n, os, is, out.data,
            in.data);
    return;
  }
  // From the last element back: each line starts at its end and steps backwards (the
  // implementations take signed steps; the views themselves keep their strides).
  impl.fn(stream, LaunchSpec(name, {&in}, {&out}), in.dtype, lines, n, -os, -is,
          moved(out.data, out.dtype, (n - 1) * os), moved(in.data, in.dtype, (n - 1) * is));
}

}  // namespace

void reduce(const Stream& stream, Reduce op, const View& out, const View& in) {
  const char* name = name_of(op);
  const auto impl = dispatch::resolve<KernelId::kReduce>(name, stream);
  front::call(impl, stream, "reduce", front::Chunking::kNone, Operands<1>{out}, Operands<1>{in},
              [&](const Operands<1>& o, const Operands<1>& i, bool) {
                reduce_views(impl, stream, op, name, o[0], i[0]);
              });
}

void arg_reduce(const Stream& stream, bool is_max, const View& values, const View& indices,
                const View& in, int64_t dim) {
  const char* name = is_max ? "argmax" : "argmin";
  const auto impl = dispatch::resolve<KernelId::kArgReduce>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<2>{values, indices},
              Operands<1>{in}, [&](const Operands<2>& o, const Operands<1>& i, bool) {
                arg_reduce_views(impl, stream, is_max, name, o[0], o[1], i[0], dim);
              });
}

void cumsum(const Stream& stream, const View& out, const View& in, int64_t dim,
            bool reverse) {
  const char* name = "cumsum";
  const auto impl = dispatch::resolve<KernelId::kCumsum>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{out}, Operands<1>{in},
              [&](const Operands<1>& o, const Operands<1>& i, bool) {
                cumsum_views(impl, stream, o[0], i[0], dim, reverse);
              });
}

}  // namespace kernels
}  // namespace streamgrad

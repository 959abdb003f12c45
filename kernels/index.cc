// index_select, index_add, index_copy, scatter_add, scatter, scatter_reduce and gather,
// check_index_range (the same validation under a caller's name) and index_linear: the
// front door. Checks here, then the implementation registered for the stream's device
// (kernels/host/index.cc on cpu and sim, kernels/cuda/index.cu on cuda), which validates
// every index before it touches an element. index_select and gather only move elements:
// the host takes 16-bit views as they are, cuda widens them; index_add, index_copy and the
// scatters combine in float32.
#include <string>
#include <vector>

#include "kernels/checks.h"
#include "kernels/dispatch/kernel_args.h"
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

// The implementation's arguments but the walk and its data: the index view and its range.
IndexArgs index_args(const char* kernel, const View& index, int64_t dim, int64_t limit) {
  IndexArgs a{};
  a.name = kernel;
  a.index = static_cast<const int64_t*>(index.data);
  a.index_layout = cpu::make_layout<1>(index.sizes, {index.strides.data()});
  a.dim = dim;
  a.limit = limit;
  return a;
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

// `inner` (named inner_name) is no larger than `outer` on every dim but `dim`: what
// gather asks of out against in, and scatter_add of src against out.
void check_fits(const char* name, const char* inner_name, const View& inner,
                const char* outer_name, const View& outer, int64_t dim) {
  bool fits = true;
  for (int64_t d = 0; d < outer.dim(); ++d) {
    fits = fits && (d == dim || inner.sizes[d] <= outer.sizes[d]);
  }
  SG_CHECK(fits, ValueError, name, ": ", inner_name, " ", cpu::describe(inner),
           " is larger than ", outer_name, " ", cpu::describe(outer), " on a dim other than ",
           dim);
}

void check_common(const char* name, const View& out, const View& other,
                  const char* other_name, const View& index, int64_t dim) {
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

// index_select's and gather's shared body: out[o] = in[o's position with index[i] along
// dim] over the walk (out, in without dim, index).
void read_indexed(const dispatch::Impl<KernelId::kIndexRead>& impl, const Stream& stream,
                  const char* name, const View& out, const View& in, const View& index,
                  int64_t dim, IndexArgs a) {
  if (a.walk.numel == 0) return;
  a.out = out.data;
  a.other = in.data;
  a.step = in.strides[dim];
  impl.fn(stream, LaunchSpec(name, {&in, &index}, {&out}), out.dtype, a);
}

// index_add's and scatter_add's shared body: out[walk] += src.
void accumulate_indexed(const dispatch::Impl<KernelId::kIndexAccumulate>& impl,
                        const Stream& stream, const char* name, const View& out,
                        const View& src, const View& index, int64_t dim, IndexArgs a) {
  if (a.walk.numel == 0) return;
  a.out = out.data;
  a.other = src.data;
  a.step = out.strides[dim];
  impl.fn(stream, LaunchSpec(name, {&out, &src, &index}, {&out}), out.dtype, a);
}

}  // namespace

void index_select(const Stream& stream, const View& out, const View& in, int64_t dim,
                  const View& index) {
  const char* name = "index_select";
  const auto impl = dispatch::resolve<KernelId::kIndexRead>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{out}, Operands<1>{in},
              [&](const Operands<1>& o, const Operands<1>& i, bool) {
                const View &out = o[0], &in = i[0];
                check_common(name, out, in, "in", index, dim);
                check_one_d(name, out, in, "in", index, dim, out);
                IndexArgs a = index_args(name, index, dim, in.sizes[dim]);
                const std::vector<int64_t> in_strides = without_dim(in, dim);
                const std::vector<int64_t> idx_strides = index_along(index, out.dim(), dim);
                a.walk = cpu::make_layout<3>(
                    out.sizes, {out.strides.data(), in_strides.data(), idx_strides.data()});
                read_indexed(impl, stream, name, out, in, index, dim, a);
              });
}

namespace {

// index_add's checks and walk, for index_add (assign false) and index_copy (true).
void index_into(const char* name, bool assign, const Stream& stream, const View& out,
                int64_t dim, const View& index, const View& src) {
  const auto impl = dispatch::resolve<KernelId::kIndexAccumulate>(name, stream);
  front::call(impl, stream, name, front::kAccumulate, Operands<1>{out}, Operands<1>{src},
              [&](const Operands<1>& o, const Operands<1>& i, bool) {
                const View &out = o[0], &src = i[0];
                check_common(name, out, src, "src", index, dim);
                cpu::check_floating(name, "out", out);
                check_one_d(name, out, src, "src", index, dim, src);
                IndexArgs a = index_args(name, index, dim, out.sizes[dim]);
                const std::vector<int64_t> out_strides = without_dim(out, dim);
                const std::vector<int64_t> idx_strides = index_along(index, src.dim(), dim);
                a.walk = cpu::make_layout<3>(
                    src.sizes, {out_strides.data(), src.strides.data(), idx_strides.data()});
                a.combine = assign ? IndexCombine::kAssign : IndexCombine::kAdd;
                accumulate_indexed(impl, stream, name, out, src, index, dim, a);
              });
}

}  // namespace

void index_add(const Stream& stream, const View& out, int64_t dim, const View& index,
               const View& src) {
  index_into("index_add", false, stream, out, dim, index, src);
}

void index_copy(const Stream& stream, const View& out, int64_t dim, const View& index,
                const View& src) {
  index_into("index_copy", true, stream, out, dim, index, src);
}

namespace {

// scatter_add's checks and walk, for scatter_add (kAdd), scatter (kAssign) and
// scatter_reduce (every combine), launched as `name`.
void scatter_into(const char* name, IndexCombine combine, bool include_self,
                  const Stream& stream, const View& out, int64_t dim, const View& index,
                  const View& src) {
  const auto impl = dispatch::resolve<KernelId::kIndexAccumulate>(name, stream);
  front::call(impl, stream, name, front::kAccumulate, Operands<1>{out}, Operands<1>{src},
              [&](const Operands<1>& o, const Operands<1>& i, bool) {
                const View &out = o[0], &src = i[0];
                check_common(name, out, src, "src", index, dim);
                cpu::check_floating(name, "out", out);
                cpu::check_same_sizes(name, "index", index, "src", src);
                check_fits(name, "src", src, "out", out, dim);
                IndexArgs a = index_args(name, index, dim, out.sizes[dim]);
                const std::vector<int64_t> out_strides = without_dim(out, dim);
                a.walk = cpu::make_layout<3>(
                    src.sizes, {out_strides.data(), src.strides.data(), index.strides.data()});
                a.combine = combine;
                a.include_self = include_self;
                accumulate_indexed(impl, stream, name, out, src, index, dim, a);
              });
}

}  // namespace

void scatter_add(const Stream& stream, const View& out, int64_t dim, const View& index,
                 const View& src) {
  scatter_into("scatter_add", IndexCombine::kAdd, true, stream, out, dim, index, src);
}

void scatter(const Stream& stream, const View& out, int64_t dim, const View& index,
             const View& src) {
  scatter_into("scatter", IndexCombine::kAssign, true, stream, out, dim, index, src);
}

void scatter_reduce(const Stream& stream, const View& out, int64_t dim, const View& index,
                    const View& src, IndexCombine op, bool include_self, const char* name) {
  scatter_into(name, op, include_self || op == IndexCombine::kAssign, stream, out, dim, index,
               src);
}

void gather(const Stream& stream, const View& out, const View& in, int64_t dim,
            const View& index) {
  const char* name = "gather";
  const auto impl = dispatch::resolve<KernelId::kIndexRead>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{out}, Operands<1>{in},
              [&](const Operands<1>& o, const Operands<1>& i, bool) {
                const View &out = o[0], &in = i[0];
                check_common(name, out, in, "in", index, dim);
                cpu::check_same_sizes(name, "index", index, "out", out);
                check_fits(name, "out", out, "in", in, dim);
                IndexArgs a = index_args(name, index, dim, in.sizes[dim]);
                const std::vector<int64_t> in_strides = without_dim(in, dim);
                a.walk = cpu::make_layout<3>(
                    out.sizes, {out.strides.data(), in_strides.data(), index.strides.data()});
                read_indexed(impl, stream, name, out, in, index, dim, a);
              });
}

void check_index_range(const Stream& stream, const View& index, int64_t limit,
                       const std::string& context) {
  check_index_range(stream, index, 0, limit, context);
}

void check_index_range(const Stream& stream, const View& index, int64_t low, int64_t limit,
                       const std::string& context) {
  const char* name = "check_index_range";
  const auto impl = dispatch::resolve<KernelId::kCheckIndexRange>(name, stream);
  cpu::check_view(name, "index", index);
  cpu::check_dtype(name, "index", index, DType::kInt64);
  if (index.numel() == 0) return;
  const cpu::Layout<1> layout = cpu::make_layout<1>(index.sizes, {index.strides.data()});
  impl.fn(stream, LaunchSpec(name, {&index}, {}), layout,
          static_cast<const int64_t*>(index.data), low, limit, context);
}

void index_linear(const Stream& stream, const View& out, const View& index, int64_t size,
                  int64_t stride, bool accumulate) {
  const char* name = "index_linear";
  const auto impl = dispatch::resolve<KernelId::kIndexLinear>(name, stream);
  cpu::check_output(name, "out", out);
  cpu::check_view(name, "index", index);
  cpu::check_dtype(name, "out", out, DType::kInt64);
  cpu::check_dtype(name, "index", index, DType::kInt64);
  cpu::check_same_sizes(name, "out", out, "index", index);
  cpu::check_disjoint(name, "out", out, "index", index);
  if (out.numel() == 0) return;
  const cpu::Layout<2> layout =
      cpu::make_layout<2>(out.sizes, {out.strides.data(), index.strides.data()});
  // out is read too when accumulating (null views are skipped).
  impl.fn(stream, LaunchSpec(name, {&index, accumulate ? &out : nullptr}, {&out}), layout,
          static_cast<int64_t*>(out.data), static_cast<const int64_t*>(index.data), size,
          stride, accumulate);
}

}  // namespace kernels
}  // namespace streamgrad

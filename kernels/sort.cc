// sort / topk along a dim and multinomial sampling: the front door. Checks here, then the
// implementation registered for the stream's device (kernels/host/sort.cc on cpu and sim,
// kernels/cuda/sort.cu on cuda), both ordering and drawing with
// kernels/functors/sort_ops.h. float16 and bfloat16 are sorted as their exact float32
// copies (front.h), so the values come back unchanged.
#include <cstdint>
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

using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Operands;

void check_sortable(const char* name, const char* what, const View& v) {
  SG_CHECK(is_floating(v.dtype) || v.dtype == DType::kInt64, ValueError, name, ": ", what, " ",
           cpu::describe(v), " must be floating or int64 to be ordered");
}

}  // namespace

void sort(const Stream& stream, const View& values, const View& indices, const View& in,
          int64_t dim, bool descending, const char* name) {
  const auto impl = dispatch::resolve<KernelId::kSort>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<2>{values, indices},
              Operands<1>{in}, [&](const Operands<2>& o, const Operands<1>& i, bool) {
                const View &v = o[0], &ix = o[1], &x = i[0];
                cpu::check_output(name, "values", v);
                cpu::check_output(name, "indices", ix);
                cpu::check_view(name, "in", x);
                check_sortable(name, "in", x);
                cpu::check_same_dtype(name, "values", v, "in", x);
                cpu::check_dtype(name, "indices", ix, DType::kInt64);
                cpu::check_dim(name, dim, x);
                cpu::check_same_sizes(name, "indices", ix, "values", v);
                std::vector<int64_t> want = x.sizes;
                const int64_t k = v.sizes.size() == x.sizes.size() ? v.sizes[dim] : -1;
                SG_CHECK(k >= 0 && k <= x.sizes[dim], ValueError, name, ": values ",
                         cpu::describe(v), " must have in's sizes with at most ", x.sizes[dim],
                         " elements along dim ", dim, "; in is ", cpu::describe(x));
                want[dim] = k;
                SG_CHECK(v.sizes == want, ValueError, name, ": values ", cpu::describe(v),
                         " must have in's sizes except along dim ", dim, "; in is ",
                         cpu::describe(x));
                cpu::check_disjoint(name, "values", v, "in", x);
                cpu::check_disjoint(name, "indices", ix, "in", x);
                cpu::check_disjoint(name, "indices", ix, "values", v);
                if (v.numel() == 0) return;
                std::vector<int64_t> walk = x.sizes;
                walk[dim] = 1;
                SortArgs a;
                a.walk = cpu::make_layout<3>(walk, {v.strides.data(), ix.strides.data(),
                                                    x.strides.data()});
                a.n = x.sizes[dim];
                a.k = k;
                a.in_step = x.strides[dim];
                a.values_step = v.strides[dim];
                a.indices_step = ix.strides[dim];
                a.descending = descending;
                impl.fn(stream, LaunchSpec(name, {&x}, {&v, &ix}), x.dtype, a, v.data,
                        static_cast<int64_t*>(ix.data), x.data);
              });
}

void multinomial(const Stream& stream, const View& out, const View& probs, uint64_t seed,
                 uint64_t offset) {
  const char* name = "multinomial";
  const auto impl = dispatch::resolve<KernelId::kMultinomial>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<0>{}, Operands<1>{probs},
              [&](const Operands<0>&, const Operands<1>& i, bool) {
                const View& p = i[0];
                cpu::check_contiguous(name, "out", out, 2);
                cpu::check_output(name, "out", out);
                cpu::check_dtype(name, "out", out, DType::kInt64);
                cpu::check_view(name, "probs", p);
                cpu::check_floating(name, "probs", p);
                SG_CHECK(p.sizes.size() == 2 && p.sizes[0] == out.sizes[0], ValueError, name,
                         ": probs ", cpu::describe(p), " must be [rows, categories] with out's ",
                         out.sizes[0], " rows");
                cpu::check_disjoint(name, "out", out, "probs", p);
                if (out.numel() == 0) return;
                SG_CHECK(p.sizes[1] > 0, ValueError, name, ": probs ", cpu::describe(p),
                         " has no categories to draw from");
                MultinomialArgs a;
                a.rows = out.sizes[0];
                a.samples = out.sizes[1];
                a.categories = p.sizes[1];
                a.row_stride = p.strides[0];
                a.category_stride = p.strides[1];
                a.seed = seed;
                a.offset = offset;
                impl.fn(stream, LaunchSpec(name, {&p}, {&out}), p.dtype, a,
                        static_cast<int64_t*>(out.data), p.data);
              });
}

}  // namespace kernels
}  // namespace streamgrad

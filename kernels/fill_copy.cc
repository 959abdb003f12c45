// fill, copy (with dtype conversion) and arange: the front door. Checks here, then the
// implementation registered for the stream's device (kernels/host/fill_copy.cc on cpu and
// sim, kernels/cuda/elementwise.cu on cuda).
#include <cmath>

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

Layout<1> out_layout(const View& out) {
  return cpu::make_layout<1>(out.sizes, {out.strides.data()});
}

}  // namespace

void fill(const Stream& stream, const View& out, double value) {
  const char* name = "fill";
  const auto impl = dispatch::resolve<KernelId::kFill>(name, stream);
  cpu::check_output(name, "out", out);
  if (out.dtype == DType::kInt64) {
    SG_CHECK(in_int64_range(value), ValueError, name,
             ": value ", value, " does not fit in int64 (out is ", cpu::describe(out), ")");
  }
  const Layout<1> l = out_layout(out);
  if (l.numel == 0) return;
  impl.fn(stream, LaunchSpec(name, {}, {&out}), out.dtype, l, out.data, value);
}

void copy(const Stream& stream, const View& out, const View& in) {
  const char* name = "copy";
  const auto impl = dispatch::resolve<KernelId::kCopy>(name, stream);
  cpu::check_output(name, "out", out);
  cpu::check_view(name, "in", in);
  cpu::check_same_sizes(name, "out", out, "in", in);
  cpu::check_no_partial_overlap(name, "out", out, "in", in);
  const Layout<2> l = cpu::make_layout<2>(out.sizes, {out.strides.data(), in.strides.data()});
  if (l.numel == 0) return;
  impl.fn(stream, LaunchSpec(name, {&in}, {&out}), out.dtype, in.dtype, l, out.data, in.data);
}

void arange(const Stream& stream, const View& out, double start, double step) {
  const char* name = "arange";
  const auto impl = dispatch::resolve<KernelId::kArange>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{out}, Operands<0>{},
              [&](const Operands<1>& o, const Operands<0>&, bool) {
                const View& v = o[0];
                cpu::check_output(name, "out", v);
                SG_CHECK(v.dtype != DType::kBool, ValueError, name, ": out is ",
                         cpu::describe(v), "; expected float32, float64 or int64");
                if (v.dtype == DType::kInt64) {
                  // Integer ranges are computed in int64, exactly, so they must start and
                  // step on integers.
                  SG_CHECK(std::abs(start) < kInt64Bound && std::abs(step) < kInt64Bound &&
                               std::trunc(start) == start && std::trunc(step) == step,
                           ValueError, name, ": start ", start, " and step ", step,
                           " must be integers in int64 range for an int64 out");
                  const double last =
                      std::abs(start) + std::abs(step) * static_cast<double>(v.numel());
                  SG_CHECK(last < kInt64Bound, ValueError, name, ": start ", start, " + step ",
                           step, " * ", v.numel(), " elements overflows int64");
                }
                // Any strides work: the layout is walked in row-major order, so the running
                // counter is the flat index the contract speaks of.
                const Layout<1> l = out_layout(v);
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {}, {&v}), v.dtype, l, v.data, start, step);
              });
}

}  // namespace kernels
}  // namespace streamgrad

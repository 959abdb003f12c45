// compare, compare_scalar and where: the front door. Checks here, then the implementation
// registered for the stream's device (kernels/host/select.cc on cpu and sim,
// kernels/cuda/elementwise.cu on cuda), around the functors of kernels/functors/select_ops.h.
// compare widens 16-bit inputs to float32; where only moves elements, so the host takes
// 16-bit views as they are and cuda widens them.
#include <cstdint>
#include <initializer_list>

#include "kernels/checks.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/dispatch/strided.h"
#include "kernels/front.h"
#include "kernels/kernels.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;
using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Operands;

const char* name_of(Compare op, bool scalar) {
  switch (op) {
    case Compare::kEq: return scalar ? "eq_scalar" : "eq";
    case Compare::kNe: return scalar ? "ne_scalar" : "ne";
    case Compare::kLt: return scalar ? "lt_scalar" : "lt";
    case Compare::kLe: return scalar ? "le_scalar" : "le";
    case Compare::kGt: return scalar ? "gt_scalar" : "gt";
    case Compare::kGe: return scalar ? "ge_scalar" : "ge";
  }
  return "compare";
}

struct Arg {
  const char* what;
  const View& view;
};

// The checks every kernel here starts with: a writable out of `out_dtype`, well-formed
// inputs of out's sizes that overlap out only by being it.
void check_args(const char* name, const View& out, DType out_dtype,
                std::initializer_list<Arg> inputs) {
  cpu::check_output(name, "out", out);
  cpu::check_dtype(name, "out", out, out_dtype);
  for (const Arg& in : inputs) {
    cpu::check_view(name, in.what, in.view);
    cpu::check_same_sizes(name, "out", out, in.what, in.view);
    cpu::check_no_partial_overlap(name, "out", out, in.what, in.view);
  }
}

}  // namespace

void compare(const Stream& stream, Compare op, const View& out, const View& a, const View& b) {
  const char* name = name_of(op, false);
  const auto impl = dispatch::resolve<KernelId::kCompare>(name, stream);
  front::call(impl, stream, "compare", front::Chunking::kNone, Operands<1>{out},
              Operands<2>{a, b}, [&](const Operands<1>& o, const Operands<2>& i, bool) {
                check_args(name, o[0], DType::kBool, {{"a", i[0]}, {"b", i[1]}});
                cpu::check_same_dtype(name, "a", i[0], "b", i[1]);
                const Layout<3> l = cpu::make_layout<3>(
                    o[0].sizes, {o[0].strides.data(), i[0].strides.data(), i[1].strides.data()});
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {&i[0], &i[1]}, {&o[0]}), op, i[0].dtype, l,
                        o[0].data, i[0].data, i[1].data);
              });
}

void compare_scalar(const Stream& stream, Compare op, const View& out, const View& in,
                    double scalar) {
  const char* name = name_of(op, true);
  const auto impl = dispatch::resolve<KernelId::kCompareScalar>(name, stream);
  front::call(impl, stream, "compare_scalar", front::Chunking::kNone, Operands<1>{out},
              Operands<1>{in}, [&](const Operands<1>& o, const Operands<1>& i, bool widened) {
                // kernels.h: the scalar is rounded to the tensor's dtype first.
                const double s = widened ? cpu::round_to(in.dtype, scalar) : scalar;
                check_args(name, o[0], DType::kBool, {{"in", i[0]}});
                const Layout<2> l =
                    cpu::make_layout<2>(o[0].sizes, {o[0].strides.data(), i[0].strides.data()});
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {&i[0]}, {&o[0]}), op, i[0].dtype, l,
                        o[0].data, i[0].data, s);
              });
}

void where(const Stream& stream, const View& out, const View& condition, const View& a,
           const View& b) {
  const char* name = "where";
  const auto impl = dispatch::resolve<KernelId::kWhere>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{out},
              Operands<3>{condition, a, b},
              [&](const Operands<1>& o, const Operands<3>& i, bool) {
                const View &c = i[0], &x = i[1], &y = i[2];
                check_args(name, o[0], x.dtype, {{"condition", c}, {"a", x}, {"b", y}});
                cpu::check_dtype(name, "condition", c, DType::kBool);
                cpu::check_same_dtype(name, "a", x, "b", y);
                const Layout<4> l = cpu::make_layout<4>(
                    o[0].sizes, {o[0].strides.data(), c.strides.data(), x.strides.data(),
                                 y.strides.data()});
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {&c, &x, &y}, {&o[0]}), o[0].dtype, l,
                        o[0].data, c.data, x.data, y.data);
              });
}

}  // namespace kernels
}  // namespace streamgrad

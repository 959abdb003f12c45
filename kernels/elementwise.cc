// unary, unary_scalar, binary and axpy: the front door. Checks here, then the
// implementation registered for the stream's device (kernels/host/elementwise.cc on cpu
// and sim, kernels/cuda/elementwise.cu on cuda), with the math of
// kernels/functors/elementwise_ops.h on both.
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

const char* name_of(Unary op) {
  switch (op) {
    case Unary::kNeg: return "neg";
    case Unary::kExp: return "exp";
    case Unary::kLog: return "log";
    case Unary::kSqrt: return "sqrt";
    case Unary::kTanh: return "tanh";
    case Unary::kSigmoid: return "sigmoid";
    case Unary::kRelu: return "relu";
    case Unary::kAbs: return "abs";
    case Unary::kSign: return "sign";
    case Unary::kReciprocal: return "reciprocal";
    case Unary::kSquare: return "square";
    case Unary::kErf: return "erf";
    case Unary::kSin: return "sin";
    case Unary::kCos: return "cos";
    case Unary::kLog1p: return "log1p";
    case Unary::kRsqrt: return "rsqrt";
    case Unary::kSilu: return "silu";
    case Unary::kGelu: return "gelu";
    case Unary::kGeluTanh: return "gelu(tanh)";
  }
  return "unary";
}

const char* name_of(UnaryScalar op) {
  switch (op) {
    case UnaryScalar::kAdd: return "add_scalar";
    case UnaryScalar::kMul: return "mul_scalar";
    case UnaryScalar::kPow: return "pow_scalar";
    case UnaryScalar::kRSub: return "rsub_scalar";
    case UnaryScalar::kRDiv: return "rdiv_scalar";
    case UnaryScalar::kGe: return "ge_scalar";
    case UnaryScalar::kClampMin: return "clamp_min";
    case UnaryScalar::kClampMax: return "clamp_max";
  }
  return "unary_scalar";
}

const char* name_of(Binary op) {
  switch (op) {
    case Binary::kAdd: return "add";
    case Binary::kSub: return "sub";
    case Binary::kMul: return "mul";
    case Binary::kDiv: return "div";
    case Binary::kPow: return "pow";
    case Binary::kReluBackward: return "relu_backward";
    case Binary::kTanhBackward: return "tanh_backward";
    case Binary::kSigmoidBackward: return "sigmoid_backward";
    case Binary::kGeluBackward: return "gelu_backward";
    case Binary::kGeluTanhBackward: return "gelu_backward(tanh)";
    case Binary::kSiluBackward: return "silu_backward";
  }
  return "binary";
}

// The checks shared by every element-wise kernel with one input.
Layout<2> check_map1(const char* name, const View& out, const View& in) {
  cpu::check_output(name, "out", out);
  cpu::check_view(name, "in", in);
  cpu::check_floating(name, "out", out);
  cpu::check_same_dtype(name, "out", out, "in", in);
  cpu::check_same_sizes(name, "out", out, "in", in);
  cpu::check_no_partial_overlap(name, "out", out, "in", in);
  return cpu::make_layout<2>(out.sizes, {out.strides.data(), in.strides.data()});
}

Layout<3> check_map2(const char* name, const View& out, const View& a, const View& b) {
  cpu::check_floating_out_a_b(name, out, a, b);
  cpu::check_same_sizes(name, "out", out, "a", a);
  cpu::check_same_sizes(name, "out", out, "b", b);
  cpu::check_no_partial_overlap(name, "out", out, "a", a);
  cpu::check_no_partial_overlap(name, "out", out, "b", b);
  return cpu::make_layout<3>(out.sizes,
                             {out.strides.data(), a.strides.data(), b.strides.data()});
}

}  // namespace

void unary(const Stream& stream, Unary op, const View& out, const View& in) {
  const char* name = name_of(op);
  const auto impl = dispatch::resolve<KernelId::kUnary>(name, stream);
  front::call(impl, stream, name, front::Chunking::kElementwise, Operands<1>{out},
              Operands<1>{in}, [&](const Operands<1>& o, const Operands<1>& i, bool) {
                const Layout<2> l = check_map1(name, o[0], i[0]);
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {&i[0]}, {&o[0]}), op, o[0].dtype, l,
                        o[0].data, i[0].data);
              });
}

void unary_scalar(const Stream& stream, UnaryScalar op, const View& out, const View& in,
                  double scalar) {
  const char* name = name_of(op);
  const auto impl = dispatch::resolve<KernelId::kUnaryScalar>(name, stream);
  front::call(impl, stream, name, front::Chunking::kElementwise, Operands<1>{out},
              Operands<1>{in}, [&](const Operands<1>& o, const Operands<1>& i, bool widened) {
                const Layout<2> l = check_map1(name, o[0], i[0]);
                if (l.numel == 0) return;
                // kernels.h: the scalar is rounded to the tensor's dtype first (a 16-bit
                // one, whether widened here or computed natively).
                const double s =
                    widened || is_reduced_floating(in.dtype) ? cpu::round_to(in.dtype, scalar)
                                                             : scalar;
                impl.fn(stream, LaunchSpec(name, {&i[0]}, {&o[0]}), op, o[0].dtype, l,
                        o[0].data, i[0].data, s);
              });
}

void binary(const Stream& stream, Binary op, const View& out, const View& a, const View& b) {
  const char* name = name_of(op);
  const auto impl = dispatch::resolve<KernelId::kBinary>(name, stream);
  front::call(impl, stream, name, front::Chunking::kElementwise, Operands<1>{out},
              Operands<2>{a, b}, [&](const Operands<1>& o, const Operands<2>& i, bool) {
                const Layout<3> l = check_map2(name, o[0], i[0], i[1]);
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {&i[0], &i[1]}, {&o[0]}), op, o[0].dtype, l,
                        o[0].data, i[0].data, i[1].data);
              });
}

void axpy(const Stream& stream, const View& out, const View& a, const View& b, double alpha) {
  const char* name = "axpy";
  const auto impl = dispatch::resolve<KernelId::kAxpy>(name, stream);
  front::call(impl, stream, name, front::Chunking::kElementwise, Operands<1>{out},
              Operands<2>{a, b}, [&](const Operands<1>& o, const Operands<2>& i, bool) {
                const Layout<3> l = check_map2(name, o[0], i[0], i[1]);
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {&i[0], &i[1]}, {&o[0]}), o[0].dtype, l,
                        o[0].data, i[0].data, i[1].data, alpha);
              });
}

}  // namespace kernels
}  // namespace streamgrad

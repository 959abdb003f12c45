// unary, unary_scalar, binary and axpy: checks here, then the loops of the level in use
// (kernels/cpu/loops_elementwise.cc, the math in kernels/elementwise_ops.h), split over
// threads above kParallelGrain elements; on cuda streams the kernels of
// kernels/cuda_kernels.h, with the same math.
#include "kernels/cpu/checks.h"
#include "kernels/cpu/launch_kernel.h"
#include "kernels/cpu/strided.h"
#include "kernels/cpu/widen.h"
#include "kernels/cuda_kernels.h"
#include "kernels/kernels.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

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
  }
  return "binary";
}

// The checks shared by every element-wise kernel with one input.
Layout<2> check_map1(const char* name, const Stream& stream, const View& out, const View& in) {
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  cpu::check_output(name, "out", out);
  cpu::check_view(name, "in", in);
  cpu::check_floating(name, "out", out);
  cpu::check_same_dtype(name, "out", out, "in", in);
  cpu::check_same_sizes(name, "out", out, "in", in);
  cpu::check_no_partial_overlap(name, "out", out, "in", in);
  return cpu::make_layout<2>(out.sizes, {out.strides.data(), in.strides.data()});
}

Layout<3> check_map2(const char* name, const Stream& stream, const View& out, const View& a,
                     const View& b) {
  cpu::check_floating_out_a_b(name, stream, out, a, b, /*has_cuda=*/true);
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
  if (cpu::Widen::applies({&out, &in})) {
    if (cpu::for_each_chunk(out, 2, [&](int64_t d, int64_t i, int64_t n) {
          unary(stream, op, cpu::slice_of(out, d, i, n), cpu::slice_of(in, d, i, n));
        })) {
      return;
    }
    cpu::Widen w(stream, name);
    unary(stream, op, w.out(out), w.in(in));
    return w.finish();
  }
  const Layout<2> l = check_map1(name, stream, out, in);
  if (l.numel == 0) return;
  void* o = out.data;
  const void* x = in.data;
  const DType dt = out.dtype;
  cpu::launch_loop_or_cuda(
      stream, name, {&in}, {&out}, l,
      [op, dt, o, x](const cpu::Loops& loops, const Layout<2>& l, int64_t b, int64_t e) {
        loops.unary(op, dt, l, o, x, b, e);
      },
      [stream, op, dt, o, x](const Layout<2>& l) { cuda::unary(stream, op, dt, l, o, x); });
}

void unary_scalar(const Stream& stream, UnaryScalar op, const View& out, const View& in,
                  double scalar) {
  const char* name = name_of(op);
  if (cpu::Widen::applies({&out, &in})) {
    if (cpu::for_each_chunk(out, 2, [&](int64_t d, int64_t i, int64_t n) {
          unary_scalar(stream, op, cpu::slice_of(out, d, i, n), cpu::slice_of(in, d, i, n),
                       scalar);
        })) {
      return;
    }
    cpu::Widen w(stream, name);
    unary_scalar(stream, op, w.out(out), w.in(in), cpu::round_to(in.dtype, scalar));
    return w.finish();
  }
  const Layout<2> l = check_map1(name, stream, out, in);
  if (l.numel == 0) return;
  void* o = out.data;
  const void* x = in.data;
  const DType dt = out.dtype;
  cpu::launch_loop_or_cuda(
      stream, name, {&in}, {&out}, l,
      [op, dt, o, x, scalar](const cpu::Loops& loops, const Layout<2>& l, int64_t b,
                             int64_t e) { loops.unary_scalar(op, dt, l, o, x, scalar, b, e); },
      [stream, op, dt, o, x, scalar](const Layout<2>& l) {
        cuda::unary_scalar(stream, op, dt, l, o, x, scalar);
      });
}

void binary(const Stream& stream, Binary op, const View& out, const View& a, const View& b) {
  const char* name = name_of(op);
  if (cpu::Widen::applies({&out, &a, &b})) {
    if (cpu::for_each_chunk(out, 3, [&](int64_t d, int64_t i, int64_t n) {
          binary(stream, op, cpu::slice_of(out, d, i, n), cpu::slice_of(a, d, i, n),
                 cpu::slice_of(b, d, i, n));
        })) {
      return;
    }
    cpu::Widen w(stream, name);
    binary(stream, op, w.out(out), w.in(a), w.in(b));
    return w.finish();
  }
  const Layout<3> l = check_map2(name, stream, out, a, b);
  if (l.numel == 0) return;
  void* o = out.data;
  const void* pa = a.data;
  const void* pb = b.data;
  const DType dt = out.dtype;
  cpu::launch_loop_or_cuda(
      stream, name, {&a, &b}, {&out}, l,
      [op, dt, o, pa, pb](const cpu::Loops& loops, const Layout<3>& l, int64_t begin,
                          int64_t end) { loops.binary(op, dt, l, o, pa, pb, begin, end); },
      [stream, op, dt, o, pa, pb](const Layout<3>& l) {
        cuda::binary(stream, op, dt, l, o, pa, pb);
      });
}

void axpy(const Stream& stream, const View& out, const View& a, const View& b, double alpha) {
  const char* name = "axpy";
  if (cpu::Widen::applies({&out, &a, &b})) {
    if (cpu::for_each_chunk(out, 3, [&](int64_t d, int64_t i, int64_t n) {
          axpy(stream, cpu::slice_of(out, d, i, n), cpu::slice_of(a, d, i, n),
               cpu::slice_of(b, d, i, n), alpha);
        })) {
      return;
    }
    cpu::Widen w(stream, name);
    axpy(stream, w.out(out), w.in(a), w.in(b), alpha);
    return w.finish();
  }
  const Layout<3> l = check_map2(name, stream, out, a, b);
  if (l.numel == 0) return;
  void* o = out.data;
  const void* pa = a.data;
  const void* pb = b.data;
  const DType dt = out.dtype;
  cpu::launch_loop_or_cuda(
      stream, name, {&a, &b}, {&out}, l,
      [dt, o, pa, pb, alpha](const cpu::Loops& loops, const Layout<3>& l, int64_t begin,
                             int64_t end) { loops.axpy(dt, l, o, pa, pb, alpha, begin, end); },
      [stream, dt, o, pa, pb, alpha](const Layout<3>& l) {
        cuda::axpy(stream, dt, l, o, pa, pb, alpha);
      });
}

}  // namespace kernels
}  // namespace streamgrad

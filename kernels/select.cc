// compare, compare_scalar and where: strided loops around the functors of
// kernels/functors/select_ops.h, with the op and dtypes chosen outside the element loop; on cuda
// streams the kernels of kernels/cuda/cuda_kernels.h around the same functors.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "kernels/checks.h"
#include "kernels/widen.h"
#include "kernels/launch_kernel.h"
#include "kernels/dispatch/strided.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "kernels/functors/select_ops.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

// out[i] = op(a[i], b[i]) with a bool out and inputs of type T.
template <typename T, typename Op>
void compare_loop(const Layout<3>& l, void* out, const void* a, const void* b, Op op) {
  uint8_t* o0 = static_cast<uint8_t*>(out);
  const T* a0 = static_cast<const T*>(a);
  const T* b0 = static_cast<const T*>(b);
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    uint8_t* o = o0 + off[0];
    const T* x = a0 + off[1];
    const T* y = b0 + off[2];
    for (int64_t i = 0; i < n; ++i) {
      o[i * step[0]] = op(compare_value(x[i * step[1]]), compare_value(y[i * step[2]]));
    }
  });
}

// out[i] = op(in[i], s) for a scalar s of type S.
template <typename T, typename S, typename Op>
void compare_scalar_loop(const Layout<2>& l, void* out, const void* in, S s, Op op) {
  uint8_t* o0 = static_cast<uint8_t*>(out);
  const T* x0 = static_cast<const T*>(in);
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    uint8_t* o = o0 + off[0];
    const T* x = x0 + off[1];
    if (step[0] == 1 && step[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = op(compare_value(x[i]), s);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * step[0]] = op(compare_value(x[i * step[1]]), s);
    }
  });
}

template <typename T>
void where_loop(const Layout<4>& l, void* out, const void* condition, const void* a,
                const void* b) {
  T* o0 = static_cast<T*>(out);
  const uint8_t* c0 = static_cast<const uint8_t*>(condition);
  const T* a0 = static_cast<const T*>(a);
  const T* b0 = static_cast<const T*>(b);
  const SelectOp select;
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    const uint8_t* c = c0 + off[1];
    const T* x = a0 + off[2];
    const T* y = b0 + off[3];
    for (int64_t i = 0; i < n; ++i) {
      o[i * step[0]] = select(c[i * step[1]], x[i * step[2]], y[i * step[3]]);
    }
  });
}

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

// The checks every kernel here starts with: a supported stream, a writable out of
// `out_dtype`, well-formed inputs of out's sizes that overlap out only by being it.
void check_args(const char* name, const Stream& stream, const View& out, DType out_dtype,
                std::initializer_list<Arg> inputs) {
  cpu::check_stream(name, stream, /*has_cuda=*/true);
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
  if (cpu::Widen::applies({&out, &a, &b})) {
    cpu::Widen w(stream, "compare");
    compare(stream, op, out, w.in(a), w.in(b));
    return w.finish();
  }
  const char* name = name_of(op, false);
  check_args(name, stream, out, DType::kBool, {{"a", a}, {"b", b}});
  cpu::check_same_dtype(name, "a", a, "b", b);
  const Layout<3> l =
      cpu::make_layout<3>(out.sizes, {out.strides.data(), a.strides.data(), b.strides.data()});
  if (l.numel == 0) return;
  void* o = out.data;
  const void* pa = a.data;
  const void* pb = b.data;
  const DType dt = a.dtype;
  cpu::launch_kernel_or_cuda(
      stream, name, {&a, &b}, {&out},
      [op, o, pa, pb, dt](const Layout<3>& l) {
        cpu::dispatch_any(dt, [&](auto t) {
          with_compare(op, [&](auto f) { compare_loop<decltype(t)>(l, o, pa, pb, f); });
        });
      },
      [stream, op, o, pa, pb, dt](const Layout<3>& l) {
        cuda::compare(stream, op, dt, l, o, pa, pb);
      },
      l);
}

void compare_scalar(const Stream& stream, Compare op, const View& out, const View& in,
                    double scalar) {
  if (cpu::Widen::applies({&out, &in})) {
    cpu::Widen w(stream, "compare_scalar");
    compare_scalar(stream, op, out, w.in(in), cpu::round_to(in.dtype, scalar));
    return w.finish();
  }
  const char* name = name_of(op, true);
  check_args(name, stream, out, DType::kBool, {{"in", in}});
  const Layout<2> l = cpu::make_layout<2>(out.sizes, {out.strides.data(), in.strides.data()});
  if (l.numel == 0) return;
  void* o = out.data;
  const void* x = in.data;
  const DType dt = in.dtype;
  cpu::launch_kernel_or_cuda(
      stream, name, {&in}, {&out},
      [op, o, x, dt, scalar](const Layout<2>& l) {
        cpu::dispatch_any(dt, [&](auto t) {
          using T = decltype(t);
          with_compare(op, [&](auto f) {
            with_compare_scalar<T>(scalar,
                                   [&](auto sv) { compare_scalar_loop<T>(l, o, x, sv, f); });
          });
        });
      },
      [stream, op, o, x, dt, scalar](const Layout<2>& l) {
        cuda::compare_scalar(stream, op, dt, l, o, x, scalar);
      },
      l);
}

void where(const Stream& stream, const View& out, const View& condition, const View& a,
           const View& b) {
  if (cpu::widen_to_move(stream, {&out, &a, &b})) {
    cpu::Widen w(stream, "where");
    where(stream, w.out(out), condition, w.in(a), w.in(b));
    return w.finish();
  }
  const char* name = "where";
  check_args(name, stream, out, a.dtype, {{"condition", condition}, {"a", a}, {"b", b}});
  cpu::check_dtype(name, "condition", condition, DType::kBool);
  cpu::check_same_dtype(name, "a", a, "b", b);
  const Layout<4> l = cpu::make_layout<4>(
      out.sizes, {out.strides.data(), condition.strides.data(), a.strides.data(),
                  b.strides.data()});
  if (l.numel == 0) return;
  void* o = out.data;
  const void* pc = condition.data;
  const void* pa = a.data;
  const void* pb = b.data;
  const DType dt = out.dtype;
  cpu::launch_kernel_or_cuda(
      stream, name, {&condition, &a, &b}, {&out},
      [o, pc, pa, pb, dt](const Layout<4>& l) {
        cpu::dispatch_all(dt, [&](auto t) { where_loop<decltype(t)>(l, o, pc, pa, pb); });
      },
      [stream, o, pc, pa, pb, dt](const Layout<4>& l) {
        cuda::where(stream, dt, l, o, pc, pa, pb);
      },
      l);
}

}  // namespace kernels
}  // namespace streamgrad

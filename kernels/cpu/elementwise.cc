// unary, unary_scalar, binary and axpy: one strided loop per op, with the op chosen
// outside the element loop so that each loop body is a single inlined expression.
#include <cmath>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/strided.h"
#include "kernels/kernels.h"
#include "runtime/launch.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

template <typename T, typename Op>
void map1(const Layout<2>& l, void* out, const void* in, Op op) {
  T* o0 = static_cast<T*>(out);
  const T* x0 = static_cast<const T*>(in);
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    const T* x = x0 + off[1];
    if (step[0] == 1 && step[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = op(x[i]);
    } else {
      const int64_t so = step[0], sx = step[1];
      for (int64_t i = 0; i < n; ++i) o[i * so] = op(x[i * sx]);
    }
  });
}

template <typename T, typename Op>
void map2(const Layout<3>& l, void* out, const void* a, const void* b, Op op) {
  T* o0 = static_cast<T*>(out);
  const T* a0 = static_cast<const T*>(a);
  const T* b0 = static_cast<const T*>(b);
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    const T* x = a0 + off[1];
    const T* y = b0 + off[2];
    if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = op(x[i], y[i]);
    } else if (step[0] == 1 && step[1] == 1 && step[2] == 0) {
      const T c = *y;  // a row plus a broadcast scalar: the bias-add shape
      for (int64_t i = 0; i < n; ++i) o[i] = op(x[i], c);
    } else {
      const int64_t so = step[0], sa = step[1], sb = step[2];
      for (int64_t i = 0; i < n; ++i) o[i * so] = op(x[i * sa], y[i * sb]);
    }
  });
}

template <typename T>
T sigmoid(T x) {
  // Two branches so that exp never overflows to inf/inf.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T>
void run_unary(Unary op, const Layout<2>& l, void* o, const void* x) {
  switch (op) {
    case Unary::kNeg:
      return map1<T>(l, o, x, [](T v) { return -v; });
    case Unary::kExp:
      return map1<T>(l, o, x, [](T v) { return std::exp(v); });
    case Unary::kLog:
      return map1<T>(l, o, x, [](T v) { return std::log(v); });
    case Unary::kSqrt:
      return map1<T>(l, o, x, [](T v) { return std::sqrt(v); });
    case Unary::kTanh:
      return map1<T>(l, o, x, [](T v) { return std::tanh(v); });
    case Unary::kSigmoid:
      return map1<T>(l, o, x, [](T v) { return sigmoid(v); });
    case Unary::kRelu:  // written so that NaN propagates
      return map1<T>(l, o, x, [](T v) { return v < 0 ? T(0) : v; });
    case Unary::kAbs:
      return map1<T>(l, o, x, [](T v) { return std::abs(v); });
    case Unary::kSign:  // NaN stays NaN
      return map1<T>(l, o, x, [](T v) { return v > 0 ? T(1) : v < 0 ? T(-1) : v * 0; });
    case Unary::kReciprocal:
      return map1<T>(l, o, x, [](T v) { return T(1) / v; });
    case Unary::kSquare:
      return map1<T>(l, o, x, [](T v) { return v * v; });
  }
}

template <typename T>
void run_unary_scalar(UnaryScalar op, const Layout<2>& l, void* o, const void* x, T s) {
  switch (op) {
    case UnaryScalar::kAdd:
      return map1<T>(l, o, x, [s](T v) { return v + s; });
    case UnaryScalar::kMul:
      return map1<T>(l, o, x, [s](T v) { return v * s; });
    case UnaryScalar::kPow:
      if (s == T(2)) return map1<T>(l, o, x, [](T v) { return v * v; });
      return map1<T>(l, o, x, [s](T v) { return std::pow(v, s); });
    case UnaryScalar::kRSub:
      return map1<T>(l, o, x, [s](T v) { return s - v; });
    case UnaryScalar::kRDiv:
      return map1<T>(l, o, x, [s](T v) { return s / v; });
    case UnaryScalar::kGe:
      return map1<T>(l, o, x, [s](T v) { return v >= s ? T(1) : T(0); });
  }
}

template <typename T>
void run_binary(Binary op, const Layout<3>& l, void* o, const void* a, const void* b) {
  switch (op) {
    case Binary::kAdd:
      return map2<T>(l, o, a, b, [](T x, T y) { return x + y; });
    case Binary::kSub:
      return map2<T>(l, o, a, b, [](T x, T y) { return x - y; });
    case Binary::kMul:
      return map2<T>(l, o, a, b, [](T x, T y) { return x * y; });
    case Binary::kDiv:
      return map2<T>(l, o, a, b, [](T x, T y) { return x / y; });
    case Binary::kPow:
      return map2<T>(l, o, a, b, [](T x, T y) { return std::pow(x, y); });
    case Binary::kReluBackward:
      return map2<T>(l, o, a, b, [](T g, T x) { return x > 0 ? g : T(0); });
    case Binary::kTanhBackward:
      return map2<T>(l, o, a, b, [](T g, T y) { return g * (T(1) - y * y); });
    case Binary::kSigmoidBackward:
      return map2<T>(l, o, a, b, [](T g, T y) { return g * y * (T(1) - y); });
  }
}

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
  cpu::check_stream(name, stream);
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
  cpu::check_floating_out_a_b(name, stream, out, a, b);
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
  const Layout<2> l = check_map1(name, stream, out, in);
  if (l.numel == 0) return;
  const MemRange reads[] = {in.byte_range()};
  const MemRange writes[] = {out.byte_range()};
  void* o = out.data;
  const void* x = in.data;
  const DType dt = out.dtype;
  launch(stream, {name, reads, writes}, [l, op, o, x, dt] {
    cpu::dispatch_floating(dt, [&](auto t) { run_unary<decltype(t)>(op, l, o, x); });
  });
}

void unary_scalar(const Stream& stream, UnaryScalar op, const View& out, const View& in,
                  double scalar) {
  const char* name = name_of(op);
  const Layout<2> l = check_map1(name, stream, out, in);
  if (l.numel == 0) return;
  const MemRange reads[] = {in.byte_range()};
  const MemRange writes[] = {out.byte_range()};
  void* o = out.data;
  const void* x = in.data;
  const DType dt = out.dtype;
  launch(stream, {name, reads, writes}, [l, op, o, x, dt, scalar] {
    cpu::dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      // The scalar takes the tensor's precision, as a float32 tensor op would in PyTorch.
      run_unary_scalar<T>(op, l, o, x, static_cast<T>(scalar));
    });
  });
}

void binary(const Stream& stream, Binary op, const View& out, const View& a, const View& b) {
  const char* name = name_of(op);
  const Layout<3> l = check_map2(name, stream, out, a, b);
  if (l.numel == 0) return;
  const MemRange reads[] = {a.byte_range(), b.byte_range()};
  const MemRange writes[] = {out.byte_range()};
  void* o = out.data;
  const void* pa = a.data;
  const void* pb = b.data;
  const DType dt = out.dtype;
  launch(stream, {name, reads, writes}, [l, op, o, pa, pb, dt] {
    cpu::dispatch_floating(dt, [&](auto t) { run_binary<decltype(t)>(op, l, o, pa, pb); });
  });
}

void axpy(const Stream& stream, const View& out, const View& a, const View& b, double alpha) {
  const char* name = "axpy";
  const Layout<3> l = check_map2(name, stream, out, a, b);
  if (l.numel == 0) return;
  const MemRange reads[] = {a.byte_range(), b.byte_range()};
  const MemRange writes[] = {out.byte_range()};
  void* o = out.data;
  const void* pa = a.data;
  const void* pb = b.data;
  const DType dt = out.dtype;
  launch(stream, {name, reads, writes}, [l, o, pa, pb, dt, alpha] {
    cpu::dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      const T s = static_cast<T>(alpha);
      if (s == T(1)) {
        map2<T>(l, o, pa, pb, [](T x, T y) { return x + y; });
      } else {
        map2<T>(l, o, pa, pb, [s](T x, T y) { return x + s * y; });
      }
    });
  });
}

}  // namespace kernels
}  // namespace streamgrad

// unary, unary_scalar, binary and axpy against reference loops: contiguous, transposed,
// sliced and broadcast (stride 0) views, in place, 0-d and empty views, and the errors
// raised before anything is enqueued.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using kernels::Binary;
using kernels::Unary;
using kernels::UnaryScalar;
using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::random_values;
using testing::Shape;

constexpr double kSentinel = -777;

double ref(Unary op, double x) {
  switch (op) {
    case Unary::kNeg: return -x;
    case Unary::kExp: return std::exp(x);
    case Unary::kLog: return std::log(x);
    case Unary::kSqrt: return std::sqrt(x);
    case Unary::kTanh: return std::tanh(x);
    case Unary::kSigmoid: return 1 / (1 + std::exp(-x));
    case Unary::kRelu: return x > 0 ? x : 0;
    case Unary::kAbs: return std::abs(x);
    case Unary::kSign: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case Unary::kReciprocal: return 1 / x;
    case Unary::kSquare: return x * x;
    case Unary::kErf: return std::erf(x);
    case Unary::kSin: return std::sin(x);
    case Unary::kCos: return std::cos(x);
    case Unary::kLog1p: return std::log1p(x);
    case Unary::kRsqrt: return 1 / std::sqrt(x);
    case Unary::kSilu: return x / (1 + std::exp(-x));
    case Unary::kGelu: return x * 0.5 * std::erfc(-x / std::sqrt(2.0));
    case Unary::kGeluTanh: {
      const double k = std::sqrt(2 / M_PI);
      return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
  }
  return 0;
}

double ref(UnaryScalar op, double x, double s) {
  switch (op) {
    case UnaryScalar::kAdd: return x + s;
    case UnaryScalar::kMul: return x * s;
    case UnaryScalar::kPow: return std::pow(x, s);
    case UnaryScalar::kRSub: return s - x;
    case UnaryScalar::kRDiv: return s / x;
    case UnaryScalar::kGe: return x >= s ? 1 : 0;
    case UnaryScalar::kClampMin: return std::max(x, s);
    case UnaryScalar::kClampMax: return std::min(x, s);
  }
  return 0;
}

double ref(Binary op, double a, double b) {
  switch (op) {
    case Binary::kAdd: return a + b;
    case Binary::kSub: return a - b;
    case Binary::kMul: return a * b;
    case Binary::kDiv: return a / b;
    case Binary::kPow: return std::pow(a, b);
    case Binary::kReluBackward: return b > 0 ? a : 0;
    case Binary::kTanhBackward: return a * (1 - b * b);
    case Binary::kSigmoidBackward: return a * b * (1 - b);
    // Derivatives written independently of the functors: gelu' = Phi + x phi, silu' from
    // the quotient rule, the tanh form's by the chain rule on x (1 + tanh(u)) / 2.
    case Binary::kGeluBackward:
      return a * (0.5 * std::erfc(-b / std::sqrt(2.0)) +
                  b * std::exp(-b * b / 2) / std::sqrt(2 * M_PI));
    case Binary::kGeluTanhBackward: {
      const double k = std::sqrt(2 / M_PI), u = k * (b + 0.044715 * b * b * b);
      const double th = std::tanh(u), du = k * (1 + 3 * 0.044715 * b * b);
      return a * (0.5 * (1 + th) + 0.5 * b * (1 - th * th) * du);
    }
    case Binary::kSiluBackward: {
      const double e = std::exp(-b);
      return a * ((1 + e) + b * e) / ((1 + e) * (1 + e));
    }
  }
  return 0;
}

// Checks that `out` holds `want` at `shape`'s elements and the sentinel everywhere else.
template <typename T>
void check_out(const Buffer<T>& out, const Shape& shape, const std::vector<double>& want) {
  const std::vector<T> all = out.read();
  testing::check_close(gather(all, shape), want);
  std::vector<bool> inside(all.size(), false);
  for (int64_t off : shape.offsets()) inside[static_cast<size_t>(off)] = true;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!inside[i]) CHECK(all[i] == static_cast<T>(kSentinel));
  }
}

TEMPLATE_TEST_CASE("unary ops on contiguous, transposed and sliced views", "[elementwise]",
                   float, double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Unary op = GENERATE(Unary::kNeg, Unary::kExp, Unary::kLog, Unary::kSqrt, Unary::kTanh,
                            Unary::kSigmoid, Unary::kRelu, Unary::kAbs, Unary::kSign,
                            Unary::kReciprocal, Unary::kSquare, Unary::kErf, Unary::kSin,
                            Unary::kCos, Unary::kLog1p, Unary::kRsqrt, Unary::kSilu,
                            Unary::kGelu, Unary::kGeluTanh);
  INFO("device " << dev << ", op " << static_cast<int>(op));
  const Stream s = current_stream(dev);
  const bool positive = op == Unary::kLog || op == Unary::kSqrt || op == Unary::kRsqrt;
  const std::vector<T> host = random_values<T>(12, positive ? 0.1 : -3, 3, 1);
  Buffer<T> in(dev, host);
  LaunchLog log;

  // in is stored [4, 3] and read transposed as [3, 4]; out is every other column of a
  // [3, 8] buffer.
  const Shape in_shapes[] = {Shape({3, 4}), Shape({4, 3}).transposed(0, 1)};
  const Shape out_shapes[] = {Shape({3, 4}), Shape({3, 4}, {8, 2}, 1)};
  for (int variant = 0; variant < 2; ++variant) {
    const Shape& is = in_shapes[variant];
    const Shape& os = out_shapes[variant];
    Buffer<T> out(dev, 24, static_cast<T>(kSentinel));
    kernels::unary(s, op, out.view(os), in.view(is));
    std::vector<double> want;
    for (T x : gather(host, is)) want.push_back(ref(op, x));
    check_out(out, os, want);
    log.expect_ranges(log.last().name, {in.view(is)}, {out.view(os)});
  }
}

TEMPLATE_TEST_CASE("unary_scalar ops, with the scalar in the tensor's precision",
                   "[elementwise]", float, double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const UnaryScalar op = GENERATE(UnaryScalar::kAdd, UnaryScalar::kMul, UnaryScalar::kPow,
                                  UnaryScalar::kRSub, UnaryScalar::kRDiv, UnaryScalar::kClampMin,
                                  UnaryScalar::kClampMax);
  const double scalar = GENERATE(2.0, -0.5);
  INFO("device " << dev << ", op " << static_cast<int>(op) << ", scalar " << scalar);
  const Stream s = current_stream(dev);
  const std::vector<T> host = random_values<T>(10, 0.2, 3, 2);
  Buffer<T> in(dev, host);
  Buffer<T> out(dev, 20, static_cast<T>(kSentinel));
  LaunchLog log;
  const Shape is({2, 5}, {1, 2});  // transposed storage
  const Shape os({2, 5}, {10, 2}, 1);
  kernels::unary_scalar(s, op, out.view(os), in.view(is), scalar);
  std::vector<double> want;
  for (T x : gather(host, is)) want.push_back(ref(op, x, static_cast<T>(scalar)));
  check_out(out, os, want);
  log.expect_ranges(log.last().name, {in.view(is)}, {out.view(os)});
}

TEMPLATE_TEST_CASE("binary ops broadcast inputs through stride 0", "[elementwise]", float,
                   double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Binary op = GENERATE(Binary::kAdd, Binary::kSub, Binary::kMul, Binary::kDiv,
                             Binary::kPow, Binary::kReluBackward, Binary::kTanhBackward,
                             Binary::kSigmoidBackward, Binary::kGeluBackward,
                             Binary::kGeluTanhBackward, Binary::kSiluBackward);
  INFO("device " << dev << ", op " << static_cast<int>(op));
  const Stream s = current_stream(dev);
  const std::vector<T> ha = random_values<T>(24, 0.1, 2, 3);
  const std::vector<T> hb = random_values<T>(12, -1, 1, 4);
  Buffer<T> a(dev, ha), b(dev, hb);
  LaunchLog log;

  SECTION("b is [1, 3, 1] broadcast to [2, 3, 4]") {
    const Shape as({2, 3, 4}), bs({2, 3, 4}, {0, 1, 0}), os({2, 3, 4});
    Buffer<T> out(dev, 24, static_cast<T>(kSentinel));
    kernels::binary(s, op, out.view(os), a.view(as), b.view(bs));
    std::vector<double> want;
    const auto ga = gather(ha, as), gb = gather(hb, bs);
    for (size_t i = 0; i < ga.size(); ++i) want.push_back(ref(op, ga[i], gb[i]));
    check_out(out, os, want);
    log.expect_ranges(log.last().name, {a.view(as), b.view(bs)}, {out.view(os)});
  }
  SECTION("a is a scalar broadcast, b transposed, out a strided slice") {
    const Shape as({3, 4}, {0, 0}, 5), bs({3, 4}, {1, 3}), os({3, 4}, {10, 2}, 3);
    Buffer<T> out(dev, 32, static_cast<T>(kSentinel));
    kernels::binary(s, op, out.view(os), a.view(as), b.view(bs));
    std::vector<double> want;
    const auto ga = gather(ha, as), gb = gather(hb, bs);
    for (size_t i = 0; i < ga.size(); ++i) want.push_back(ref(op, ga[i], gb[i]));
    check_out(out, os, want);
    log.expect_ranges(log.last().name, {a.view(as), b.view(bs)}, {out.view(os)});
  }
}

TEMPLATE_TEST_CASE("axpy, out of place and in place", "[elementwise]", float, double) {
  using T = TestType;
  const Device dev = testing::test_device();
  INFO("device " << dev);
  const Stream s = current_stream(dev);
  const std::vector<T> ha = random_values<T>(6, -1, 1, 5), hb = random_values<T>(6, -1, 1, 6);
  Buffer<T> a(dev, ha), b(dev, hb);
  LaunchLog log;
  const Shape sh({2, 3});
  std::vector<double> want;
  for (size_t i = 0; i < 6; ++i) want.push_back(ha[i] + static_cast<T>(-0.25) * hb[i]);

  Buffer<T> out(dev, 6, T(0));
  kernels::axpy(s, out.view(sh), a.view(sh), b.view(sh), -0.25);
  testing::check_close(out.read(), want);
  log.expect_ranges("axpy", {a.view(sh), b.view(sh)}, {out.view(sh)});

  kernels::axpy(s, a.view(sh), a.view(sh), b.view(sh), -0.25);  // a += -0.25 * b
  testing::check_close(a.read(), want);
  log.expect_ranges("axpy", {a.view(sh), b.view(sh)}, {a.view(sh)});
}

TEST_CASE("NaN propagates through relu, sign and abs", "[elementwise]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  const double nan = std::nan("");
  Buffer<double> in(dev, {nan, -1.5, 0.0, 2.0});
  Buffer<double> out(dev, 4, 0.0);
  kernels::unary(s, Unary::kRelu, out.view(), in.view());
  testing::check_close(out.read(), {nan, 0, 0, 2});
  kernels::unary(s, Unary::kSign, out.view(), in.view());
  testing::check_close(out.read(), {nan, -1, 0, 1});
  kernels::unary(s, Unary::kAbs, out.view(), in.view());
  testing::check_close(out.read(), {nan, 1.5, 0, 2});
}

// Float GELU comes from one exp, not erf (kernels/functors/gelu_float.h): its error over a
// dense sweep of [-16, 16] (through the vector loops), in ulp of the float nearest the
// double-precision value. Backward's is in ulp of |Phi| + |x phi|, its terms' size: their
// difference crosses 0 near x = -0.75, where no float form keeps relative accuracy.
double float_ulp(double v) {
  const float f = std::abs(static_cast<float>(v));
  int e = 0;
  std::frexp(f, &e);
  return f == 0 ? std::ldexp(1.0, -149) : std::max(std::ldexp(1.0, e - 24), std::ldexp(1.0, -149));
}

TEST_CASE("float gelu and its backward are within a few ulp from -16 to 16", "[elementwise]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  std::vector<float> xs;
  for (int i = 0; i <= 320000; ++i) xs.push_back(-16.0f + static_cast<float>(i) * 1e-4f);
  for (int k = 1; k <= 38; ++k) {
    xs.push_back(std::ldexp(1.0f, -k));
    xs.push_back(-std::ldexp(1.0f, -k));
  }
  Buffer<float> in(dev, xs), ones(dev, xs.size(), 1.0f), out(dev, xs.size(), 0.0f);
  kernels::unary(s, Unary::kGelu, out.view(), in.view());
  const std::vector<float> y = out.read();
  kernels::binary(s, Binary::kGeluBackward, out.view(), ones.view(), in.view());
  const std::vector<float> dy = out.read();
  double worst_above = 0, worst_below = 0, worst_grad = 0, worst_grad_below = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], want = ref(Unary::kGelu, x);
    const double err = std::abs(y[i] - want) / float_ulp(want);
    (x >= -8 ? worst_above : worst_below) = std::max(x >= -8 ? worst_above : worst_below, err);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double xpdf = x * std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
    const double scale = float_ulp(std::abs(cdf) + std::abs(xpdf));
    const double ge = std::abs(dy[i] - ref(Binary::kGeluBackward, 1, x)) / scale;
    (x >= -8 ? worst_grad : worst_grad_below) =
        std::max(x >= -8 ? worst_grad : worst_grad_below, ge);
  }
  INFO("worst ulp for x >= -8 and below: forward " << worst_above << ", " << worst_below
                                                    << "; backward " << worst_grad << ", "
                                                    << worst_grad_below);
  // Measured 6.81 and 6.59 near x = 0, 11.88 and 11.51 below -8. The math is the same on
  // every machine (fma and gelu_float.h's own exp, no library function), so the bounds sit
  // just above: a Taylor series for exp one degree shorter gives 7.84 forward.
  CHECK(worst_above <= 7);
  CHECK(worst_grad <= 7);
  // Below -8 the values fall towards float's smallest normal numbers (1e-38 at -13).
  CHECK(worst_below <= 12);
  CHECK(worst_grad_below <= 12);

  // inf, -inf (x * Phi = -inf * 0, as the reference's x / 2 * (1 + erf)), NaN, and far
  // out on both sides.
  Buffer<float> special(dev, {INFINITY, -INFINITY, NAN, -30.0f, 30.0f});
  Buffer<float> sout(dev, 5, 0.0f);
  kernels::unary(s, Unary::kGelu, sout.view(), special.view());
  const std::vector<float> v = sout.read();
  CHECK(v[0] == INFINITY);
  CHECK(std::isnan(v[1]));
  CHECK(std::isnan(v[2]));
  CHECK(v[3] == 0.0f);
  CHECK(v[4] == 30.0f);
}

TEST_CASE("0-d views compute one element; empty views launch nothing", "[elementwise]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  LaunchLog log;
  Buffer<float> a(dev, {3}), b(dev, {4}), out(dev, {0});
  const Shape scalar(std::vector<int64_t>{});
  kernels::binary(s, Binary::kMul, out.view(scalar), a.view(scalar), b.view(scalar));
  CHECK(out.read()[0] == 12);
  log.expect_ranges("mul", {a.view(scalar), b.view(scalar)}, {out.view(scalar)});

  const size_t before = log.count();
  const Shape empty({0, 3});
  kernels::binary(s, Binary::kAdd, out.view(empty), a.view(empty), b.view(empty));
  kernels::unary(s, Unary::kExp, out.view(empty), a.view(empty));
  CHECK(log.count() == before);
}

TEST_CASE("element-wise errors are ValueErrors raised before anything is enqueued",
          "[elementwise][errors]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<float> f(dev, 16, 1.0f);
  Buffer<double> d(dev, 16, 1.0);
  Buffer<int64_t> i(dev, 16, 1);
  LaunchLog log;
  const Shape s23({2, 3}), s32({3, 2});

  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(kernels::binary(s, Binary::kAdd, f.view(s23), f.view(s23), f.view(s32)),
                    Contains("add") && Contains("[2, 3]") && Contains("[3, 2]"));
  CHECK_THROWS_AS(kernels::binary(s, Binary::kAdd, f.view(s23), f.view(s23), f.view(s32)),
                  ValueError);
  CHECK_THROWS_WITH(kernels::unary(s, Unary::kExp, f.view(s23), d.view(s23)),
                    Contains("exp") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_AS(kernels::unary(s, Unary::kExp, i.view(s23), i.view(s23)), ValueError);
  CHECK_THROWS_AS(kernels::axpy(s, f.view(s23), f.view(s23), d.view(s23), 1.0), ValueError);
  // A broadcast out would be written twice at one address.
  CHECK_THROWS_WITH(
      kernels::unary(s, Unary::kNeg, f.view(Shape({2, 3}, {0, 1})), f.view(s23)),
      Contains("stride 0"));
  // Shifted by one element: neither identical nor disjoint.
  CHECK_THROWS_WITH(
      kernels::unary(s, Unary::kNeg, f.view(Shape({4}, {1}, 1)), f.view(Shape({4}))),
      Contains("overlaps"));
  // In-place transpose reads elements it has already overwritten.
  CHECK_THROWS_AS(kernels::unary(s, Unary::kNeg, f.view(Shape({3, 3})),
                                 f.view(Shape({3, 3}).transposed(0, 1))),
                  ValueError);
  kernels::View bad = f.view(s23);
  bad.strides.pop_back();
  CHECK_THROWS_AS(kernels::unary(s, Unary::kNeg, bad, f.view(s23)), ValueError);
  kernels::View deep = f.view(Shape(std::vector<int64_t>(17, 1)));
  CHECK_THROWS_WITH(kernels::unary(s, Unary::kNeg, deep, deep), Contains("rank 17"));
  CHECK(log.count() == 0);
}

}  // namespace
}  // namespace streamgrad

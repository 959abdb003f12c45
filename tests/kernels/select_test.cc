// compare, compare_scalar and where against reference loops: broadcast (stride 0),
// transposed and strided views, every dtype, NaN, in place, the declared byte ranges, and
// the errors raised before anything is enqueued.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/functors/select_ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using kernels::Compare;
using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::Shape;

constexpr uint8_t kUnset = 77;  // neither 0 nor 1: shows elements the kernel left alone

template <typename A, typename B>
uint8_t ref(Compare op, A a, B b) {
  switch (op) {
    case Compare::kEq: return a == b;
    case Compare::kNe: return a != b;
    case Compare::kLt: return a < b;
    case Compare::kLe: return a <= b;
    case Compare::kGt: return a > b;
    case Compare::kGe: return a >= b;
  }
  return 0;
}

template <typename T>
std::vector<T> read_view(const Buffer<T>& b, const Shape& s) {
  return gather(b.read(), s);
}

TEMPLATE_TEST_CASE("compare broadcasts and reads transposed views, NaN included", "[select]",
                   float, double, int64_t) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Compare op = GENERATE(Compare::kEq, Compare::kNe, Compare::kLt, Compare::kLe,
                              Compare::kGt, Compare::kGe);
  INFO("device " << dev << ", op " << static_cast<int>(op));
  const Stream s = current_stream(dev);
  std::vector<T> ha = {0, 1, 2, 3, 2, 1, 0, -1, 5, 2, 2, 0};
  if constexpr (std::is_floating_point<T>::value) ha[3] = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> hb = {2, 0, 1};
  Buffer<T> a(dev, ha), b(dev, hb);
  Buffer<uint8_t> out(dev, 24, kUnset);
  LaunchLog log;
  // a stored [3, 4], read as [4, 3]; b [3] broadcast over rows; out every other byte.
  const Shape as = Shape({3, 4}).transposed(0, 1), bs({4, 3}, {0, 1}), os({4, 3}, {6, 2}, 1);
  kernels::compare(s, op, out.view(os), a.view(as), b.view(bs));
  const auto ga = gather(ha, as), gb = gather(hb, bs);
  std::vector<uint8_t> want;
  for (size_t i = 0; i < ga.size(); ++i) want.push_back(ref(op, ga[i], gb[i]));
  CHECK(read_view(out, os) == want);
  const std::vector<uint8_t> all = out.read();
  CHECK(all[0] == kUnset);  // untouched between the strided elements
  log.expect_ranges(log.last().name, {a.view(as), b.view(bs)}, {out.view(os)});
}

TEST_CASE("compare reads bool bytes as 0/1", "[select]") {
  const Device dev = testing::test_device();
  Buffer<uint8_t> a(dev, {0, 1, 2, 255}), b(dev, {0, 1, 1, 1}), out(dev, 4, kUnset);
  kernels::compare(current_stream(dev), Compare::kEq, out.view(), a.view(), b.view());
  CHECK(out.read() == std::vector<uint8_t>{1, 1, 1, 1});
}

TEST_CASE("compare_scalar: floating scalars in the tensor's precision, int64 exactly",
          "[select]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<uint8_t> out(dev, 3, kUnset);
  Buffer<float> f(dev, {0.1f, 0.2f, std::numeric_limits<float>::quiet_NaN()});
  kernels::compare_scalar(s, Compare::kEq, out.view(), f.view(), 0.1);
  CHECK(out.read() == std::vector<uint8_t>{1, 0, 0});
  kernels::compare_scalar(s, Compare::kNe, out.view(), f.view(), 0.1);
  CHECK(out.read() == std::vector<uint8_t>{0, 1, 1});
  const int64_t big = (int64_t{1} << 53) + 1;
  Buffer<int64_t> i(dev, {0, 1, big});
  kernels::compare_scalar(s, Compare::kGt, out.view(), i.view(), 0.5);
  CHECK(out.read() == std::vector<uint8_t>{0, 1, 1});
  kernels::compare_scalar(s, Compare::kEq, out.view(), i.view(), 9007199254740992.0);
  CHECK(out.read() == std::vector<uint8_t>{0, 0, 0});
  kernels::compare_scalar(s, Compare::kLe, out.view(), i.view(), -1e300);
  CHECK(out.read() == std::vector<uint8_t>{0, 0, 0});
  LaunchLog log;
  Buffer<uint8_t> m(dev, {0, 3, 1});
  kernels::compare_scalar(s, Compare::kEq, out.view(), m.view(), 1.0);
  CHECK(out.read() == std::vector<uint8_t>{0, 1, 1});
  log.expect_ranges("eq_scalar", {m.view()}, {out.view()});
}

TEMPLATE_TEST_CASE("where selects through broadcast views and in place", "[select]", float,
                   double, int64_t, uint8_t) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  const std::vector<uint8_t> hc = {1, 0, 2};  // any non-zero byte is true
  const std::vector<T> ha = {1, 0};
  std::vector<T> hb(6);
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = static_cast<T>(i % 2 == 0 ? 1 : 0);
  Buffer<uint8_t> c(dev, hc);
  Buffer<T> a(dev, ha), b(dev, hb);
  LaunchLog log;
  // condition [3] over rows, a [2, 1] over columns, b transposed [3, 2] storage.
  const Shape cs({2, 3}, {0, 1}), as({2, 3}, {1, 0}), bs = Shape({3, 2}).transposed(0, 1);
  Buffer<T> out(dev, 6, static_cast<T>(0));
  kernels::where(s, out.view(Shape({2, 3})), c.view(cs), a.view(as), b.view(bs));
  const auto gc = gather(hc, cs), ga = gather(ha, as), gb = gather(hb, bs);
  std::vector<T> want;
  for (size_t i = 0; i < gc.size(); ++i) want.push_back(gc[i] != 0 ? ga[i] : gb[i]);
  CHECK(out.read() == want);
  log.expect_ranges("where", {c.view(cs), a.view(as), b.view(bs)}, {out.view(Shape({2, 3}))});
  // In place (masked_fill_): out is exactly b.
  Buffer<T> inplace(dev, hb);
  const Shape full({2, 3});
  kernels::where(s, inplace.view(full), c.view(cs), a.view(as), inplace.view(full));
  std::vector<T> want2;
  for (size_t i = 0; i < gc.size(); ++i) want2.push_back(gc[i] != 0 ? ga[i] : hb[i]);
  CHECK(inplace.read() == want2);
}

TEST_CASE("where keeps NaN and inf of the other operand out of the result", "[select]") {
  const Device dev = testing::test_device();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Buffer<uint8_t> c(dev, {1, 0});
  Buffer<double> a(dev, {1, nan}), b(dev, {nan, 2}), out(dev, 2, 0.0);
  kernels::where(current_stream(dev), out.view(), c.view(), a.view(), b.view());
  CHECK(out.read() == std::vector<double>{1, 2});
  CHECK(kernels::SelectOp{}(uint8_t{0}, 1.0, 2.0) == 2.0);
  CHECK(kernels::GtOp{}(int64_t{3}, 2.5) == 1);
}

TEST_CASE("compare and where refuse malformed arguments before enqueueing", "[select]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<double> a(dev, 4, 1.0), b(dev, 4, 2.0), dout(dev, 4, 0.0);
  Buffer<float> f(dev, 4, 1.0f);
  Buffer<uint8_t> m(dev, 4, 1), out(dev, 4, kUnset);
  LaunchLog log;
  const auto fails = [](auto fn, const char* part) { testing::expect_value_error(fn, part); };
  fails([&] { kernels::compare(s, Compare::kLt, dout.view(), a.view(), b.view()); }, "lt");
  fails([&] { kernels::compare(s, Compare::kLt, out.view(), a.view(), f.view()); }, "float32");
  fails([&] { kernels::compare_scalar(s, Compare::kGe, dout.view(), a.view(), 0); }, "bool");
  fails([&] { kernels::compare(s, Compare::kEq, out.view(Shape({3})), a.view(), b.view()); },
        "eq");
  fails([&] { kernels::where(s, dout.view(), a.view(), a.view(), b.view()); }, "condition");
  fails([&] { kernels::where(s, dout.view(), m.view(), f.view(), b.view()); }, "where");
  fails([&] { kernels::where(s, dout.view(Shape({2})), m.view(), a.view(), b.view()); },
        "where");
  // Partial overlap of out with an input.
  fails([&] { kernels::where(s, a.view(Shape({3})), m.view(Shape({3})), a.view(Shape({3}, {1}, 1)),
                             b.view(Shape({3}))); },
        "overlaps");
  CHECK(log.count() == 0);
  CHECK(out.read() == std::vector<uint8_t>(4, kUnset));
}

}  // namespace
}  // namespace streamgrad

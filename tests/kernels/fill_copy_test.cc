// fill, copy (every dtype pair, strided and broadcast views) and arange.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::Shape;
using Catch::Matchers::Contains;

template <typename T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (a != a) return b != b;
  }
  return a == b;
}

// The conversions copy promises, written out case by case.
template <typename To, typename From>
To expected_conversion(From v) {
  if (std::is_same<To, uint8_t>::value) return static_cast<To>(v != From(0) ? 1 : 0);
  if (std::is_same<From, uint8_t>::value) return static_cast<To>(v != 0 ? 1 : 0);
  if constexpr (std::is_same<To, int64_t>::value && std::is_floating_point<From>::value) {
    if (std::isnan(v)) return 0;
    if (v >= 9.3e18) return std::numeric_limits<int64_t>::max();
    if (v <= -9.3e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(std::trunc(v));
  }
  return static_cast<To>(v);
}

template <typename T>
std::vector<T> sample_values() {
  if constexpr (std::is_floating_point<T>::value) {
    return {T(-2.7), T(-0.0), T(0.5), T(3), T(1e20), T(-1e20), std::numeric_limits<T>::quiet_NaN(),
            T(7.9)};
  } else if constexpr (std::is_same<T, int64_t>::value) {
    return {-3, 0, 1, 5, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
            42, 7};
  } else {
    return {0, 1, 1, 0, 1, 0, 0, 1};
  }
}

template <typename To, typename From>
void check_copy_pair(Device dev) {
  INFO("copy " << dtype_name(testing::dtype_of<From>()) << " -> "
               << dtype_name(testing::dtype_of<To>()) << " on " << dev);
  const Stream s = current_stream(dev);
  const std::vector<From> host = sample_values<From>();
  Buffer<From> in(dev, host);
  Buffer<To> out(dev, 8, To(0));
  LaunchLog log;
  // in is stored [4, 2] and read transposed.
  const Shape is = Shape({4, 2}).transposed(0, 1), os({2, 4});
  kernels::copy(s, out.view(os), in.view(is));
  const std::vector<From> src = gather(host, is);
  const std::vector<To> got = out.read();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(same(got[i], expected_conversion<To>(src[i])));
  }
  log.expect_ranges("copy", {in.view(is)}, {out.view(os)});
}

template <typename From>
void check_copies_from(Device dev) {
  check_copy_pair<float, From>(dev);
  check_copy_pair<double, From>(dev);
  check_copy_pair<int64_t, From>(dev);
  check_copy_pair<uint8_t, From>(dev);
}

TEMPLATE_TEST_CASE("copy converts between every pair of dtypes", "[copy]", float, double,
                   int64_t, uint8_t) {
  check_copies_from<TestType>(testing::test_device());
}

TEST_CASE("copy of a large transpose crosses tile boundaries", "[copy]") {
  const Device dev = testing::test_device();
  const std::vector<float> host = testing::random_values<float>(70 * 45, -1, 1, 3);
  Buffer<float> in(dev, host);
  Buffer<double> out(dev, 70 * 45, 0.0);
  const Shape is = Shape({70, 45}).transposed(0, 1), os({45, 70});
  kernels::copy(current_stream(dev), out.view(os), in.view(is));
  const std::vector<float> want = gather(host, is);
  CHECK(out.read() == std::vector<double>(want.begin(), want.end()));
}

TEST_CASE("copy materialises a broadcast into a strided out", "[copy]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<float> in(dev, {1, 2, 3});
  Buffer<float> out(dev, 12, -1.0f);
  LaunchLog log;
  const Shape is({2, 3}, {0, 1}), os({2, 3}, {6, 2});
  kernels::copy(s, out.view(os), in.view(is));
  CHECK(out.read() == std::vector<float>{1, -1, 2, -1, 3, -1, 1, -1, 2, -1, 3, -1});
  log.expect_ranges("copy", {in.view(is)}, {out.view(os)});

  // Identical views are allowed (a no-op); shifted ones are not.
  kernels::copy(s, out.view(os), out.view(os));
  CHECK(out.read()[2] == 2);
  CHECK_THROWS_WITH(kernels::copy(s, out.view(Shape({4}, {1}, 1)), out.view(Shape({4}))),
                    Contains("copy") && Contains("overlaps"));
  CHECK_THROWS_AS(kernels::copy(s, out.view(Shape({3})), in.view(Shape({2}))), ValueError);
}

TEST_CASE("fill writes every dtype through strided views", "[fill]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  LaunchLog log;
  const Shape os({2, 2}, {4, 2}, 1);  // elements 1, 3, 5, 7 of 8

  Buffer<float> f(dev, 8, 0.0f);
  kernels::fill(s, f.view(os), 2.5);
  CHECK(f.read() == std::vector<float>{0, 2.5, 0, 2.5, 0, 2.5, 0, 2.5});
  log.expect_ranges("fill", {}, {f.view(os)});

  Buffer<double> d(dev, 8, 0.0);
  kernels::fill(s, d.view(os), -1.25);
  CHECK(d.read() == std::vector<double>{0, -1.25, 0, -1.25, 0, -1.25, 0, -1.25});

  Buffer<int64_t> i(dev, 8, 0);
  kernels::fill(s, i.view(os), -7);
  CHECK(i.read() == std::vector<int64_t>{0, -7, 0, -7, 0, -7, 0, -7});
  CHECK_THROWS_WITH(kernels::fill(s, i.view(os), 1e30), Contains("fill") && Contains("int64"));
  CHECK_THROWS_AS(kernels::fill(s, i.view(os), std::nan("")), ValueError);

  Buffer<uint8_t> b(dev, 8, 0);
  kernels::fill(s, b.view(os), 2.0);  // any non-zero value is true
  CHECK(b.read() == std::vector<uint8_t>{0, 1, 0, 1, 0, 1, 0, 1});
  kernels::fill(s, b.view(), 0.0);
  CHECK(b.read() == std::vector<uint8_t>(8, 0));

  CHECK_THROWS_AS(kernels::fill(s, f.view(Shape({2, 2}, {0, 1})), 1.0), ValueError);
}

TEMPLATE_TEST_CASE("arange counts in row-major order, whatever out's strides", "[arange]",
                   float, double, int64_t) {
  using T = TestType;
  const Device dev = testing::test_device();
  INFO("device " << dev);
  const Stream s = current_stream(dev);
  LaunchLog log;
  const double step = std::is_same<T, int64_t>::value ? 3 : 0.5;

  Buffer<T> out(dev, 12, T(-1));
  kernels::arange(s, out.view(Shape({2, 3})), -2, step);
  for (int i = 0; i < 6; ++i) CHECK(out.read()[i] == static_cast<T>(-2 + i * step));
  log.expect_ranges("arange", {}, {out.view(Shape({2, 3}))});

  // Out is [3, 2] over a transposed buffer: row-major element k lands at (k % 2) * 3 + k / 2.
  const Shape ts = Shape({2, 3}).transposed(0, 1);
  kernels::arange(s, out.view(ts), 1, step);
  const std::vector<T> got = gather(out.read(), ts);
  for (int k = 0; k < 6; ++k) CHECK(got[k] == static_cast<T>(1 + k * step));
}

TEST_CASE("arange rejects bool and non-integral int64 ranges", "[arange][errors]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<uint8_t> b(dev, 4, 0);
  Buffer<int64_t> i(dev, 4, 0);
  LaunchLog log;
  CHECK_THROWS_WITH(kernels::arange(s, b.view(), 0, 1), Contains("arange") && Contains("bool"));
  CHECK_THROWS_AS(kernels::arange(s, i.view(), 0.5, 1), ValueError);
  CHECK_THROWS_AS(kernels::arange(s, i.view(), 0, 4e18), ValueError);  // overflows
  CHECK(log.count() == 0);
}

}  // namespace
}  // namespace streamgrad

namespace streamgrad {
namespace kernels {
namespace {

TEST_CASE("empty views with zero strides are accepted as outputs", "[kernels][fill]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  Storage s = Storage::allocate(8, d);
  View v{s.data(), DType::kFloat32, {2, 0}, contiguous_strides({2, 0})};
  CHECK(v.strides[0] == 0);
  fill(current_stream(d), v, 1.0);  // writes nothing, throws nothing
  synchronize(d);
}

}  // namespace
}  // namespace kernels
}  // namespace streamgrad

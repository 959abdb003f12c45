// uniform and normal: bounds and moments, and the counter-based contract: element i
// depends only on (seed, offset + i), never on the device or on out's layout.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::Shape;

template <typename T>
std::vector<T> draw(Device dev, bool is_normal, size_t n, uint64_t seed, uint64_t offset) {
  Buffer<T> out(dev, n, T(0));
  const Stream s = current_stream(dev);
  if (is_normal) {
    kernels::normal(s, out.view(), 0, 1, seed, offset);
  } else {
    kernels::uniform(s, out.view(), 0, 1, seed, offset);
  }
  return out.read();
}

TEMPLATE_TEST_CASE("uniform stays in [low, high) with the right moments", "[random]", float,
                   double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  const size_t n = 20000;
  Buffer<T> out(dev, n, T(0));
  LaunchLog log;
  kernels::uniform(s, out.view(), -2, 3, 7, 0);
  log.expect_ranges("uniform", {}, {out.view()});
  const std::vector<T> v = out.read();
  double sum = 0, sq = 0;
  for (T x : v) {
    REQUIRE(x >= T(-2));
    REQUIRE(x < T(3));
    sum += x;
    sq += double(x) * x;
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  CHECK(mean == Approx(0.5).margin(0.05));      // sd of the mean is 0.01
  CHECK(var == Approx(25.0 / 12).margin(0.1));  // (high - low)^2 / 12
}

TEMPLATE_TEST_CASE("normal has the requested mean and standard deviation", "[random]", float,
                   double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  const size_t n = 20000;
  Buffer<T> out(dev, n, T(0));
  LaunchLog log;
  kernels::normal(s, out.view(), 1.5, 2, 11, 3);
  log.expect_ranges("normal", {}, {out.view()});
  double sum = 0, sq = 0, beyond_3sd = 0;
  for (T x : out.read()) {
    REQUIRE(std::isfinite(x));
    sum += x;
    sq += double(x) * x;
    if (std::abs(x - 1.5) > 6) beyond_3sd += 1;
  }
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  CHECK(mean == Approx(1.5).margin(0.06));  // sd of the mean is 0.014
  CHECK(sd == Approx(2).margin(0.05));
  CHECK(beyond_3sd / n < 0.006);  // 0.27 % expected
}

TEMPLATE_TEST_CASE("random values depend only on seed and offset + i", "[random]", float,
                   double) {
  using T = TestType;
  const bool is_normal = GENERATE(false, true);
  INFO(std::string(is_normal ? "normal" : "uniform"));
  // The same on cpu and sim.
  const std::vector<T> cpu = draw<T>(Device("cpu"), is_normal, 64, 5, 100);
  CHECK(draw<T>(Device("sim:0"), is_normal, 64, 5, 100) == cpu);
  // A draw at offset 132 continues the one at 100 from its 32nd element.
  const std::vector<T> tail = draw<T>(Device("cpu"), is_normal, 32, 5, 132);
  CHECK(std::vector<T>(cpu.begin() + 32, cpu.end()) == tail);
  // Another seed gives other numbers.
  const std::vector<T> other = draw<T>(Device("cpu"), is_normal, 64, 6, 100);
  int equal = 0;
  for (size_t i = 0; i < 64; ++i) equal += other[i] == cpu[i];
  CHECK(equal == 0);

  // A transposed out receives the same values in row-major order of the view.
  const Device dev = testing::test_device();
  Buffer<T> out(dev, 64, T(0));
  const Shape ts = Shape({8, 8}).transposed(0, 1);
  if (is_normal) {
    kernels::normal(current_stream(dev), out.view(ts), 0, 1, 5, 100);
  } else {
    kernels::uniform(current_stream(dev), out.view(ts), 0, 1, 5, 100);
  }
  const std::vector<T> got = gather(out.read(), ts);
  if (is_normal && dev.type() == DeviceType::kCuda) {
    // The device's log, sqrt and cos may round the last bit differently from the host's
    // (kernels/functors/random_ops.h): equal to within a few units in the last place.
    REQUIRE(got.size() == cpu.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i] == Approx(cpu[i]).epsilon(std::numeric_limits<T>::epsilon() * 4));
    }
  } else {
    CHECK(got == cpu);
  }
}

TEST_CASE("random kernels validate their parameters", "[random][errors]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<float> f(dev, 4, 0.0f);
  Buffer<int64_t> i(dev, 4, 0);
  LaunchLog log;
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(kernels::uniform(s, f.view(), 1, 0, 0, 0), Contains("uniform"));
  CHECK_THROWS_AS(kernels::uniform(s, i.view(), 0, 1, 0, 0), ValueError);
  CHECK_THROWS_WITH(kernels::normal(s, f.view(), 0, -1, 0, 0), Contains("normal"));
  CHECK_THROWS_AS(kernels::normal(s, f.view(), std::nan(""), 1, 0, 0), ValueError);
  CHECK(log.count() == 0);
  // A degenerate interval is fine: every value is low.
  kernels::uniform(s, f.view(), 2, 2, 0, 0);
  CHECK(f.read() == std::vector<float>(4, 2.0f));
}

}  // namespace
}  // namespace streamgrad

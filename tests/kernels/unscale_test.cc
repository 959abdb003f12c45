// non_finite_check_and_unscale (kernels/foreach.h), the gradient scaler's fused kernel:
// values in the grads' dtype, Inf and NaN found in any grad of a list and at any position
// of contiguous, transposed and sliced views (and not outside a view), the flag never
// reset, one launch with its declared ranges, asynchronous sim launches under the
// deterministic scheduler, the stream sanitizer seeing what the launch reads, and refused
// arguments.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/foreach.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using Catch::Matchers::Contains;
using kernels::View;
using testing::Buffer;
using testing::LaunchLog;
using testing::Shape;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The reference's grid: 10 x 10 grads of 4, used whole, transposed, or as the sliced
// (non-contiguous, not dense) view [:, :5].
const Shape kWhole({10, 10});
const Shape kTransposed = Shape({10, 10}).transposed(0, 1);
const Shape kSliced({10, 5}, {10, 1});

TEMPLATE_TEST_CASE("non_finite_check_and_unscale: finite grads are unscaled, the flag stays 0",
                   "[kernels][foreach][amp]", float, double) {
  using T = TestType;
  const Device d = testing::test_device();
  const std::vector<T> fours(100, T(4));
  Buffer<T> a(d, fours), b(d, fours), c(d, fours);
  Buffer<float> found(d, 1, 0.0f);
  const std::vector<View> grads = {a.view(kWhole), b.view(kTransposed), c.view(kSliced)};
  LaunchLog log;
  kernels::non_finite_check_and_unscale(current_stream(d), grads, found.view(), 0.25);
  REQUIRE(log.count() == 1);
  log.expect_ranges("non_finite_check_and_unscale",
                    {a.view(kWhole), b.view(kTransposed), c.view(kSliced), found.view()},
                    {a.view(kWhole), b.view(kTransposed), c.view(kSliced), found.view()});
  CHECK(found.read() == std::vector<float>{0.0f});
  CHECK(a.read() == std::vector<T>(100, T(1)));
  CHECK(b.read() == std::vector<T>(100, T(1)));
  // Only the sliced view's elements change: the other half of each row keeps its 4.
  const std::vector<T> got = c.read();
  for (int64_t i = 0; i < 100; ++i) {
    INFO("element " << i);
    CHECK(got[i] == (i % 10 < 5 ? T(1) : T(4)));
  }
}

TEMPLATE_TEST_CASE("non_finite_check_and_unscale multiplies by inv_scale rounded to the dtype",
                   "[kernels][foreach][amp]", float, double) {
  using T = TestType;
  const Device d = testing::test_device();
  const std::vector<T> host = testing::random_values<T>(12, -100, 100, 3);
  Buffer<T> g(d, host);
  Buffer<float> found(d, 1, 0.0f);
  const double inv = 1.0 / 3.0;  // not a power of two: the rounding shows
  kernels::non_finite_check_and_unscale(current_stream(d), {g.view(Shape({3, 4}))}, found.view(),
                                        inv);
  std::vector<T> want;
  for (T v : host) want.push_back(v * static_cast<T>(inv));
  CHECK(g.read() == want);
  CHECK(found.read() == std::vector<float>{0.0f});
}

TEMPLATE_TEST_CASE("an Inf or NaN in any grad of the list sets the flag", "[kernels][foreach][amp]",
                   float, double) {
  using T = TestType;
  const Device d = testing::test_device();
  // The reference's cases: which grad holds the bad value at [2, 2], and which views.
  struct Case {
    int bad_grad;  // -1: none
    Shape first, second;
  };
  const std::vector<Case> cases = {
      {-1, kWhole, kWhole},   {-1, kWhole, kTransposed}, {-1, kWhole, kSliced},
      {-1, kSliced, kSliced}, {1, kWhole, kWhole},       {1, kWhole, kSliced},
      {0, kWhole, kSliced},   {0, kSliced, kSliced},     {1, kTransposed, kTransposed},
  };
  for (size_t k = 0; k < 3 * cases.size(); ++k) {
    const Case& c = cases[k % cases.size()];
    const double bad = k < cases.size() ? kInf : k < 2 * cases.size() ? -kInf : kNaN;
    INFO("case " << k % cases.size() << ", bad value " << bad);
    std::vector<T> clean(100, T(4)), dirty = clean;
    dirty[22] = static_cast<T>(bad);  // [2, 2] in every view above
    Buffer<T> g0(d, c.bad_grad == 0 ? dirty : clean), g1(d, c.bad_grad == 1 ? dirty : clean);
    Buffer<float> found(d, 1, 0.0f);
    kernels::non_finite_check_and_unscale(current_stream(d), {g0.view(c.first), g1.view(c.second)},
                                          found.view(), 0.25);
    CHECK(found.read() == std::vector<float>{c.bad_grad >= 0 ? 1.0f : 0.0f});
    // Every grad is unscaled all the same (the step that follows is skipped anyway).
    const std::vector<T> r0 = g0.read(), r1 = g1.read();
    CHECK(r0[0] == T(1));
    CHECK(r1[0] == T(1));
  }
}

TEST_CASE("the flag is found at every position of a non-contiguous grad, never outside it",
          "[kernels][foreach][amp]") {
  const Device d = testing::test_device();
  // A 3 x 4 view of a 4 x 5 buffer read transposed: element (i, j) of the view is at
  // j * 5 + i, so columns 3 and 4 of the buffer lie outside the view.
  const Shape view({3, 4}, {1, 5});
  const std::vector<int64_t> inside = view.offsets();
  for (int64_t pos = 0; pos < 20; ++pos) {
    INFO("Inf at buffer position " << pos);
    std::vector<float> host(20, 2.0f);
    host[pos] = std::numeric_limits<float>::infinity();
    Buffer<float> other(d, 6, 2.0f), g(d, host);
    Buffer<float> found(d, 1, 0.0f);
    kernels::non_finite_check_and_unscale(current_stream(d), {other.view(), g.view(view)},
                                          found.view(), 0.5);
    const bool in_view = std::find(inside.begin(), inside.end(), pos) != inside.end();
    CHECK(found.read() == std::vector<float>{in_view ? 1.0f : 0.0f});
    const std::vector<float> got = g.read();
    for (int64_t i = 0; i < 20; ++i) {
      if (i == pos) continue;
      const bool seen = std::find(inside.begin(), inside.end(), i) != inside.end();
      CHECK(got[i] == (seen ? 1.0f : 2.0f));
    }
  }
}

TEST_CASE("non_finite_check_and_unscale never resets the flag to 0", "[kernels][foreach][amp]") {
  const Device d = testing::test_device();
  Buffer<float> g(d, 4, 8.0f);
  Buffer<float> found(d, 1, 1.0f);  // raised by an earlier call (another dtype group)
  kernels::non_finite_check_and_unscale(current_stream(d), {g.view()}, found.view(), 0.125);
  CHECK(found.read() == std::vector<float>{1.0f});
  CHECK(g.read() == std::vector<float>(4, 1.0f));
}

TEST_CASE("non_finite_check_and_unscale launches nothing for nothing", "[kernels][foreach][amp]") {
  const Device d = testing::test_device();
  Buffer<float> g(d, 4, 8.0f), found(d, 1, 0.0f);
  LaunchLog log;
  kernels::non_finite_check_and_unscale(current_stream(d), {}, found.view(), 0.5);
  kernels::non_finite_check_and_unscale(
      current_stream(d), {g.view(Shape({0})), g.view(Shape({2, 0}))}, found.view(), 0.5);
  CHECK(log.count() == 0);
  // Empty grads beside a non-empty one: one launch, declaring only the non-empty one.
  kernels::non_finite_check_and_unscale(current_stream(d), {g.view(Shape({0})), g.view()},
                                        found.view(), 0.5);
  REQUIRE(log.count() == 1);
  log.expect_ranges("non_finite_check_and_unscale", {g.view(), found.view()},
                    {g.view(), found.view()});
  CHECK(g.read() == std::vector<float>(4, 4.0f));
}

TEST_CASE("non_finite_check_and_unscale refuses malformed arguments before launching",
          "[kernels][foreach][amp]") {
  const Device cpu("cpu");
  const Stream s = current_stream(cpu);
  Buffer<float> g(cpu, 4, 8.0f), found(cpu, 1, 0.0f), two(cpu, 2, 0.0f);
  Buffer<double> g64(cpu, 4, 8.0), found64(cpu, 1, 0.0);
  Buffer<int64_t> gi(cpu, 4, 8);
  const Shape c({4});
  LaunchLog log;
  const char* name = "non_finite_check_and_unscale";
  CHECK_THROWS_WITH(
      kernels::non_finite_check_and_unscale(s, {g.view(), g64.view()}, found.view(), 0.5),
      Contains(name) && Contains("grad 1") && Contains("float64") &&
          Contains("group the grads by device and dtype"));
  CHECK_THROWS_AS(
      kernels::non_finite_check_and_unscale(s, {g.view(), g64.view()}, found.view(), 0.5),
      ValueError);
  CHECK_THROWS_WITH(kernels::non_finite_check_and_unscale(s, {gi.view()}, found.view(), 0.5),
                    Contains(name) && Contains("grad 0") && Contains("int64"));
  CHECK_THROWS_WITH(kernels::non_finite_check_and_unscale(s, {g.view()}, found64.view(), 0.5),
                    Contains(name) && Contains("found_inf") && Contains("float64"));
  CHECK_THROWS_WITH(kernels::non_finite_check_and_unscale(s, {g.view()}, two.view(), 0.5),
                    Contains(name) && Contains("found_inf") && Contains("[2]") &&
                        Contains("one float32 element"));
  // Checked even when there is nothing to launch.
  CHECK_THROWS_WITH(kernels::non_finite_check_and_unscale(s, {}, two.view(), 0.5),
                    Contains("found_inf"));
  CHECK_THROWS_WITH(
      kernels::non_finite_check_and_unscale(s, {g.view()}, g.view(Shape({1}, {1}, 2)), 0.5),
      Contains("grad 0") && Contains("found_inf") && Contains("overlaps"));
  CHECK_THROWS_WITH(
      kernels::non_finite_check_and_unscale(s, {g.view(Shape({4}, {0}))}, found.view(), 0.5),
      Contains("grad 0") && Contains("stride 0"));
  CHECK(log.count() == 0);
  CHECK(g.read() == std::vector<float>(4, 8.0f));
  CHECK(found.read() == std::vector<float>{0.0f});
}

TEST_CASE("on sim the kernel is only enqueued, and runs later from what it captured",
          "[kernels][foreach][amp]") {
  SimSchedulerOptions deterministic;
  deterministic.kind = SimSchedulerKind::kDeterministic;
  deterministic.policy = SimPolicy::kAdversarial;
  SimSchedulerScope scope(deterministic);  // nothing runs until the host waits
  const Device dev("sim:0");
  const Stream s = current_stream(dev);
  std::vector<float> host(12, 4.0f);
  host[7] = std::numeric_limits<float>::quiet_NaN();
  Buffer<float> a(dev, std::vector<float>(6, 4.0f)), b(dev, host);
  Buffer<double> c(dev, 5, 4.0);
  Buffer<float> found(dev, 1, 0.0f), found64(dev, 1, 0.0f);
  {
    // The views and lists die here, before any task ran.
    const std::vector<View> f32 = {a.view(Shape({2, 3})), b.view(Shape({4, 3}).transposed(0, 1))};
    kernels::non_finite_check_and_unscale(s, f32, found.view(), 0.25);
    kernels::non_finite_check_and_unscale(s, {c.view()}, found64.view(), 0.25);
  }
  CHECK_FALSE(s.query());  // still queued: the call did not wait for the device
  CHECK(found.read() == std::vector<float>{1.0f});
  CHECK(found64.read() == std::vector<float>{0.0f});
  CHECK(a.read() == std::vector<float>(6, 1.0f));
  CHECK(c.read() == std::vector<double>(5, 1.0));
  const std::vector<float> got = b.read();
  CHECK(std::isnan(got[7]));
  CHECK(got[0] == 1.0f);
}

TEST_CASE("the launch declares the grads and the flag it reads to the stream sanitizer",
          "[kernels][foreach][amp]") {
  // Values written on a side stream: the kernel on the current stream reads them
  // unordered unless the current stream waits for the side stream. The deterministic
  // scheduler runs both streams' work on the waiting host thread: the race is one the
  // stream sanitizer must see, and not one between two worker threads (which TSan
  // reports, as it should, when the threaded scheduler happens to overlap them).
  SimSchedulerOptions deterministic;
  deterministic.kind = SimSchedulerKind::kDeterministic;
  SimSchedulerScope scope(deterministic);
  const Device dev("sim:0");
  const Stream cur = current_stream(dev);
  const Stream side = Stream::create(dev);
  Buffer<float> g(dev, 8, 0.0f), found(dev, 1, 0.0f);
  const bool wait = GENERATE(false, true);
  const bool side_writes_flag = GENERATE(false, true);
  INFO((wait ? "with a wait" : "without a wait")
       << ", the side stream writes " << (side_writes_flag ? "the flag" : "the grad"));
  // Races on purpose: a process-wide sanitizer (STREAMGRAD_SANITIZE_STREAMS=1) must not
  // throw for them; this one collects.
  SanitizerSuppression races_on_purpose;
  StreamSanitizer sanitizer(StreamSanitizer::Mode::kCollect);
  side.wait_stream(cur);  // the buffers were filled on the current stream
  kernels::fill(side, side_writes_flag ? found.view() : g.view(), side_writes_flag ? 0.0 : 2.0);
  if (wait) cur.wait_stream(side);
  kernels::non_finite_check_and_unscale(cur, {g.view()}, found.view(), 0.5);
  synchronize(dev);
  CHECK(sanitizer.findings().empty() == wait);
  for (const SanitizerFinding& f : sanitizer.findings()) {
    CHECK(f.current.op == "non_finite_check_and_unscale");
  }
}

}  // namespace
}  // namespace streamgrad

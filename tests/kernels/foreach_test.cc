// The multi-tensor optimiser kernels (kernels/foreach.h): values against the update rules
// written out here in the element type, strided operands, declared ranges, fresh state,
// empty parameters, and refused arguments.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "kernels/foreach.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using kernels::View;
using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::Shape;
using Catch::Matchers::Contains;

TEST_CASE("sgd_update: momentum, nesterov and decay over strided views, one launch",
          "[kernels][foreach]") {
  const Device d = testing::test_device();
  const std::vector<float> hp{1, -2, 3, 0.5f}, hg{0.25f, 1, -1, 2}, hb{0.1f, 0.2f, 0.3f, 0.4f};
  Buffer<float> p0(d, hp), g0(d, hg), b0(d, hb);             // contiguous, buffer in use
  Buffer<float> p1(d, hp), g1(d, hg), b1(d, 4, 0.0f);        // transposed grad, fresh buffer
  const Shape c({2, 2}), t = Shape({2, 2}).transposed(0, 1);
  const kernels::SgdHyper h{0.1, 0.9, 0.25, 0.01, true};
  LaunchLog log;
  kernels::sgd_update(current_stream(d), h,
                      {{p0.view(c), g0.view(c), b0.view(c), false},
                       {p1.view(c), g1.view(t), b1.view(c), true}});
  REQUIRE(log.count() == 1);
  log.expect_ranges("sgd_update", {g0.view(c), g1.view(t), p0.view(c), p1.view(c), b0.view(c)},
                    {p0.view(c), p1.view(c), b0.view(c), b1.view(c)});
  // The fresh buffer is written before it is read: not declared as read.
  const MemRange fresh = b1.view(c).byte_range();
  for (const MemRange& r : log.last().reads) CHECK(r.ptr != fresh.ptr);
  const std::vector<float> gt = gather(hg, t);
  std::vector<float> want_p0, want_b0, want_p1, want_b1;
  for (int i = 0; i < 4; ++i) {
    const float wd = 0.01f, mom = 0.9f, keep = 0.75f, neg_lr = -0.1f;
    float g = hg[i] + wd * hp[i];
    float b = hb[i] * mom;
    b = b + keep * g;
    want_b0.push_back(b);
    want_p0.push_back(hp[i] + neg_lr * (g + mom * b));
    g = gt[i] + wd * hp[i];
    want_b1.push_back(g);  // a fresh buffer takes the gradient
    want_p1.push_back(hp[i] + neg_lr * (g + mom * g));
  }
  CHECK(p0.read() == want_p0);
  CHECK(b0.read() == want_b0);
  CHECK(p1.read() == want_p1);
  CHECK(b1.read() == want_b1);
}

TEST_CASE("adam_update: bias correction per parameter step, fresh moments start at 0",
          "[kernels][foreach]") {
  const Device d = testing::test_device();
  const std::vector<double> hp{1, -2, 3}, hg{0.5, -1, 0.25}, hm{0.1, 0.2, -0.3}, hv{1, 2, 3};
  Buffer<double> p0(d, hp), g0(d, hg), m0(d, hm), v0(d, hv);
  Buffer<double> p1(d, hp), g1(d, hg), m1(d, 3, 7.0), v1(d, 3, 7.0);  // garbage: fresh
  const kernels::AdamHyper h{0.01, 0.9, 0.99, 1e-8, 0.1, true};
  LaunchLog log;
  kernels::adam_update(current_stream(d), h,
                       {{p0.view(), g0.view(), m0.view(), v0.view(), 3, false},
                        {p1.view(), g1.view(), m1.view(), v1.view(), 1, true}});
  REQUIRE(log.count() == 1);
  CHECK(log.last().name == "adamw_update");
  const std::vector<double> got0 = p0.read(), got1 = p1.read();
  for (int i = 0; i < 3; ++i) {
    for (int which = 0; which < 2; ++which) {
      const double t = which == 0 ? 3 : 1;
      double p = hp[i] * (1 - 0.01 * 0.1);
      const double m = 0.9 * (which == 0 ? hm[i] : 0) + 0.1 * hg[i];
      const double v = 0.99 * (which == 0 ? hv[i] : 0) + 0.01 * hg[i] * hg[i];
      const double denom = std::sqrt(v) / std::sqrt(1 - std::pow(0.99, t)) + 1e-8;
      p -= 0.01 / (1 - std::pow(0.9, t)) * m / denom;
      CHECK((which == 0 ? got0 : got1)[i] == Approx(p).epsilon(1e-14));
    }
  }
}

TEST_CASE("foreach kernels skip empty parameters and launch nothing for nothing",
          "[kernels][foreach]") {
  const Stream s = current_stream(Device("cpu"));
  Buffer<float> a(Device("cpu"), 4, 1.0f), g(Device("cpu"), 4, 1.0f);
  LaunchLog log;
  kernels::sgd_update(s, {0.1}, {});
  kernels::sgd_update(s, {0.1}, {{a.view(Shape({0})), g.view(Shape({0})), View(), false}});
  CHECK(log.count() == 0);
}

TEST_CASE("foreach kernels refuse malformed lists before launching", "[kernels][foreach]") {
  const Stream s = current_stream(Device("cpu"));
  Buffer<float> p(Device("cpu"), 4, 1.0f), g(Device("cpu"), 4, 1.0f), b(Device("cpu"), 4, 0.0f);
  Buffer<double> p64(Device("cpu"), 4, 1.0), g64(Device("cpu"), 4, 1.0);
  Buffer<int64_t> pi(Device("cpu"), 4, 1);
  const Shape c({4});
  LaunchLog log;
  const kernels::SgdHyper plain{0.1};
  kernels::SgdHyper momentum{0.1, 0.9};
  CHECK_THROWS_WITH(kernels::sgd_update(s, plain, {{p.view(c), g.view(c)},
                                                   {p64.view(c), g64.view(c)}}),
                    Contains("sgd_update") && Contains("parameter 1") && Contains("float64") &&
                        Contains("group the parameters"));
  CHECK_THROWS_WITH(kernels::sgd_update(s, plain, {{p.view(c), g.view(Shape({2, 2}))}}),
                    Contains("parameter 0's grad") && Contains("[2, 2]"));
  CHECK_THROWS_WITH(kernels::sgd_update(s, plain, {{p.view(c), g64.view(c)}}),
                    Contains("parameter 0's grad") && Contains("float64"));
  CHECK_THROWS_WITH(kernels::sgd_update(s, plain, {{pi.view(c), pi.view(c)}}),
                    Contains("parameter 0") && Contains("int64"));
  CHECK_THROWS_WITH(kernels::sgd_update(s, plain, {{p.view(c), p.view(c)}}),
                    Contains("overlaps"));
  CHECK_THROWS_WITH(kernels::sgd_update(s, momentum, {{p.view(c), g.view(c), g.view(c)}}),
                    Contains("momentum buffer") && Contains("overlaps"));
  CHECK_THROWS_WITH(kernels::sgd_update(s, plain, {{p.view(Shape({4}, {0})), g.view(c)}}),
                    Contains("stride 0"));
  CHECK_THROWS_WITH(
      kernels::adam_update(s, {0.1}, {{p.view(c), g.view(c), b.view(c), b.view(c), 1, true}}),
      Contains("exp_avg_sq") && Contains("overlaps"));
  Buffer<float> v(Device("cpu"), 4, 0.0f);
  CHECK_THROWS_WITH(
      kernels::adam_update(s, {0.1}, {{p.view(c), g.view(c), b.view(c), v.view(c), 0, false}}),
      Contains("adam_update") && Contains("step 0"));
  CHECK(log.count() == 0);
}

}  // namespace
}  // namespace streamgrad

// interpolate against the reference's documented results: nearest up and down by size and
// by factor, bilinear with and without align_corners (values as torch 1.13 gives them for
// a 2x2 ramp), non-square factors, and the errors. The catalogue checks gradients.
#include <catch2/catch.hpp>

#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::input;
using testing::test_device;
using testing::values;

InterpolateOptions opts(std::vector<int64_t> size, std::vector<double> factor, const char* mode) {
  InterpolateOptions o;
  o.size = std::move(size);
  o.scale_factor = std::move(factor);
  o.mode = mode;
  return o;
}

TEST_CASE("interpolate nearest repeats and picks the reference's source pixels",
          "[ops][interpolate]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4}, {1, 1, 2, 2}, d, false);
  CHECK(values(interpolate(x, opts({}, {2}, "nearest"))) ==
        std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  CHECK(values(interpolate(x, opts({3, 1}, {}, "nearest"))) == std::vector<double>{1, 1, 3});
  const Tensor wide = input({1, 2, 3, 4, 5, 6}, {1, 1, 1, 6}, d, false);
  CHECK(values(interpolate(wide, opts({1, 4}, {}, "nearest"))) ==
        std::vector<double>{1, 2, 4, 5});  // floor(i * 6 / 4)
}

TEST_CASE("interpolate bilinear, with and without align_corners", "[ops][interpolate]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4}, {1, 1, 2, 2}, d, false);
  const std::vector<double> want = {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5,
                                    2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0};
  const std::vector<double> got = values(interpolate(x, opts({}, {2}, "bilinear")));
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]));
  InterpolateOptions corners = opts({3, 3}, {}, "bilinear");
  corners.align_corners = true;
  const std::vector<double> c = values(interpolate(x, corners));
  const std::vector<double> want_c = {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4};
  for (size_t i = 0; i < want_c.size(); ++i) CHECK(c[i] == Approx(want_c[i]));
  CHECK(interpolate(x, opts({}, {1.5, 3}, "bilinear")).sizes() == Shape({1, 1, 3, 6}));
}

TEST_CASE("interpolate refuses what the reference refuses", "[ops][interpolate][errors]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4}, {1, 1, 2, 2}, d, false);
  InterpolateOptions near = opts({}, {2}, "nearest");
  near.align_corners = false;
  REQUIRE_THROWS_WITH(interpolate(x, near), Catch::Contains("align_corners can only be set"));
  REQUIRE_THROWS_WITH(interpolate(x, opts({4, 4}, {2}, "nearest")),
                      Catch::Contains("exactly one of size and scale_factor"));
  REQUIRE_THROWS_WITH(interpolate(x, opts({}, {2}, "bicubic")),
                      Catch::Contains("mode \"bicubic\" is not supported"));
  REQUIRE_THROWS_WITH(interpolate(input({1, 2}, {1, 2}, d, false), opts({}, {2}, "nearest")),
                      Catch::Contains("expected an input [N, C, H, W]"));
  REQUIRE_THROWS_WITH(interpolate(x, opts({}, {0.2}, "nearest")),
                      Catch::Contains("must both be positive"));
}

}  // namespace
}  // namespace streamgrad

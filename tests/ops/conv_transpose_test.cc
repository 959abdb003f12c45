// conv_transpose2d against its definition written as loops here (each input element
// scatters weight * value into the output at stride and dilation, padding cropping the
// border), across stride, padding, output_padding, dilation and groups; unbatched input;
// bias; errors. The gradcheck catalogue checks its gradients.
#include <catch2/catch.hpp>

#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::input;
using testing::random_values;
using testing::test_device;
using testing::values;

struct Case {
  int64_t n, c_in, c_out, h, w, k;
  ConvTranspose2dParams p;
};

std::vector<double> by_loops(const Case& c, const std::vector<double>& x,
                             const std::vector<double>& wt, int64_t ho, int64_t wo) {
  const auto& p = c.p;
  const int64_t in_per = c.c_in / p.groups, out_per = c.c_out / p.groups;
  std::vector<double> out(static_cast<size_t>(c.n * c.c_out * ho * wo), 0.0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t ci = 0; ci < c.c_in; ++ci)
      for (int64_t i = 0; i < c.h; ++i)
        for (int64_t j = 0; j < c.w; ++j)
          for (int64_t o = 0; o < out_per; ++o)
            for (int64_t a = 0; a < c.k; ++a)
              for (int64_t b = 0; b < c.k; ++b) {
                const int64_t y = i * p.stride[0] - p.padding[0] + a * p.dilation[0];
                const int64_t z = j * p.stride[1] - p.padding[1] + b * p.dilation[1];
                if (y < 0 || y >= ho || z < 0 || z >= wo) continue;
                const int64_t co = (ci / in_per) * out_per + o;
                out[static_cast<size_t>(((n * c.c_out + co) * ho + y) * wo + z)] +=
                    x[static_cast<size_t>(((n * c.c_in + ci) * c.h + i) * c.w + j)] *
                    wt[static_cast<size_t>(((ci * out_per + o) * c.k + a) * c.k + b)];
              }
  return out;
}

ConvTranspose2dParams params(int64_t s, int64_t pad, int64_t out_pad, int64_t d, int64_t g) {
  ConvTranspose2dParams p;
  p.stride = {s, s};
  p.padding = {pad, pad};
  p.output_padding = {out_pad, out_pad};
  p.dilation = {d, d};
  p.groups = g;
  return p;
}

TEST_CASE("conv_transpose2d equals its definition", "[ops][conv]") {
  const Device d = test_device();
  const Case c = GENERATE(Case{1, 2, 3, 3, 3, 3, params(1, 0, 0, 1, 1)},
                          Case{2, 2, 3, 3, 2, 3, params(2, 1, 1, 1, 1)},
                          Case{1, 4, 2, 2, 3, 2, params(2, 0, 1, 2, 2)},
                          Case{1, 2, 2, 3, 3, 3, params(3, 2, 2, 1, 1)});
  const std::vector<double> x = random_values(c.n * c.c_in * c.h * c.w, 1);
  const std::vector<double> wt = random_values(c.c_in * (c.c_out / c.p.groups) * c.k * c.k, 2);
  const Tensor out =
      conv_transpose2d(input(x, {c.n, c.c_in, c.h, c.w}, d, false),
                       input(wt, {c.c_in, c.c_out / c.p.groups, c.k, c.k}, d, false), Tensor(),
                       c.p);
  const int64_t ho = (c.h - 1) * c.p.stride[0] - 2 * c.p.padding[0] +
                     c.p.dilation[0] * (c.k - 1) + c.p.output_padding[0] + 1;
  const int64_t wo = (c.w - 1) * c.p.stride[1] - 2 * c.p.padding[1] +
                     c.p.dilation[1] * (c.k - 1) + c.p.output_padding[1] + 1;
  REQUIRE(out.sizes() == Shape({c.n, c.c_out, ho, wo}));
  const std::vector<double> want = by_loops(c, x, wt, ho, wo), got = values(out);
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
}

TEST_CASE("conv_transpose2d: bias, unbatched input", "[ops][conv]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4}, {1, 2, 2}, d, false);  // [C=1, 2, 2]
  const Tensor w = input({1, 1, 1, 1, 2, 2, 2, 2}, {1, 2, 2, 2}, d, false);
  const Tensor b = input({10, 20}, {2}, d, false);
  const Tensor out = conv_transpose2d(x, w, b);
  REQUIRE(out.sizes() == Shape({2, 3, 3}));
  CHECK(values(out) == std::vector<double>{11, 13, 12, 14, 20, 16, 13, 17, 14,  //
                                           22, 26, 24, 28, 40, 32, 26, 34, 28});
}

TEST_CASE("conv_transpose2d refuses what does not fit", "[ops][conv][errors]") {
  const Device d = test_device();
  const Tensor x = zeros({1, 2, 3, 3}, testing::f64(d));
  const Tensor w = zeros({2, 1, 3, 3}, testing::f64(d));
  REQUIRE_THROWS_WITH(conv_transpose2d(x, zeros({3, 1, 3, 3}, testing::f64(d))),
                      Catch::Contains("has 2 channels, the weight"));
  REQUIRE_THROWS_WITH(conv_transpose2d(x, w, Tensor(), params(1, 0, 1, 1, 1)),
                      Catch::Contains("output_padding (1, 1) must be smaller than either stride"));
  REQUIRE_THROWS_WITH(conv_transpose2d(x, w, Tensor(), params(1, 0, 0, 1, 3)),
                      Catch::Contains("groups 3 must divide"));
  REQUIRE_THROWS_WITH(conv_transpose2d(x, w, zeros({2}, testing::f64(d))),
                      Catch::Contains("expected a bias of 1 elements"));
  REQUIRE_THROWS_WITH(conv_transpose2d(x, w, Tensor(), params(1, 5, 0, 1, 1)),
                      Catch::Contains("gives an empty output"));
}

}  // namespace
}  // namespace streamgrad

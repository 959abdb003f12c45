// clip_grad_norm_ and clip_grad_value_, as the reference's (test_nn.py's
// test_clip_grad_norm / test_clip_grad_value / test_clip_grad_norm_error_if_nonfinite):
// the returned norm is the norm of all gradients together, gradients shrink by
// max_norm / (norm + 1e-6) only when that is below 1, parameters without a gradient are
// skipped, and on cpu and sim alike.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "engine/factories.h"
#include "nn/clip_grad.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

std::vector<double> grad_values(const Tensor& p) { return p.grad().to_vector<double>(); }

// Two parameters with the gradients {3, -4} and {12}: 2-norm 13, inf-norm 12, 1-norm 19.
std::vector<Tensor> params_with_grads(Device d) {
  const TensorOptions o = TensorOptions().dtype(DType::kFloat64).device(d);
  Tensor a = zeros({2}, o).requires_grad_();
  Tensor b = zeros({1}, o).requires_grad_();
  Tensor c = zeros({1}, o).requires_grad_();  // no gradient: skipped
  a.set_grad(from_vector(std::vector<double>{3, -4}, {2}, o));
  b.set_grad(from_vector(std::vector<double>{12}, {1}, o));
  return {a, b, c};
}

TEST_CASE("clip_grad_norm_ returns the total norm and scales only above max_norm",
          "[nn][clip]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  INFO(d);
  SECTION("2-norm above the limit") {
    std::vector<Tensor> p = params_with_grads(d);
    CHECK(nn::utils::clip_grad_norm_(p, 6.5) == Approx(13));
    const double f = 6.5 / (13 + 1e-6);
    CHECK(grad_values(p[0])[0] == Approx(3 * f).epsilon(1e-14));
    CHECK(grad_values(p[0])[1] == Approx(-4 * f).epsilon(1e-14));
    CHECK(grad_values(p[1])[0] == Approx(12 * f).epsilon(1e-14));
    CHECK_FALSE(p[2].grad().defined());
  }
  SECTION("below the limit: unchanged") {
    std::vector<Tensor> p = params_with_grads(d);
    CHECK(nn::utils::clip_grad_norm_(p, 20) == Approx(13));
    CHECK(grad_values(p[0]) == std::vector<double>{3, -4});
    CHECK(grad_values(p[1]) == std::vector<double>{12});
  }
  SECTION("other norms") {
    std::vector<Tensor> p = params_with_grads(d);
    CHECK(nn::utils::clip_grad_norm_(p, 100, std::numeric_limits<double>::infinity()) ==
          Approx(12));
    CHECK(nn::utils::clip_grad_norm_(p, 100, 1) == Approx(19));
    CHECK(nn::utils::clip_grad_norm_(p, 100, 3) ==
          Approx(std::cbrt(27.0 + 64 + 1728)).epsilon(1e-12));
    CHECK(nn::utils::clip_grad_norm_(p, 6, std::numeric_limits<double>::infinity()) ==
          Approx(12));
    CHECK(grad_values(p[1])[0] == Approx(12 * 6 / (12 + 1e-6)).epsilon(1e-14));
  }
  SECTION("no gradients at all: 0") {
    Tensor w = zeros({3}).requires_grad_();
    CHECK(nn::utils::clip_grad_norm_({w}, 1) == 0);
  }
}

TEST_CASE("clip_grad_norm_ with a non-finite norm", "[nn][clip]") {
  std::vector<Tensor> p = params_with_grads(Device("cpu"));
  p[1].set_grad(from_vector(std::vector<double>{std::nan("")}, {1},
                            TensorOptions().dtype(DType::kFloat64)));
  REQUIRE_THROWS_WITH(nn::utils::clip_grad_norm_(p, 1, 2, /*error_if_nonfinite=*/true),
                      Catch::Contains("non-finite") && Catch::Contains("error_if_nonfinite"));
  CHECK(grad_values(p[0]) == std::vector<double>{3, -4});  // left as they were
  // Without the error the gradients are scaled by the NaN norm, as in the reference.
  CHECK(std::isnan(nn::utils::clip_grad_norm_(p, 1)));
  CHECK(std::isnan(grad_values(p[0])[0]));
  REQUIRE_THROWS_AS(nn::utils::clip_grad_norm_(p, 1, 0), ValueError);
  REQUIRE_THROWS_AS(nn::utils::clip_grad_norm_(p, 1, -2), ValueError);
}

TEST_CASE("clip_grad_value_ clamps every gradient element", "[nn][clip]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  std::vector<Tensor> p = params_with_grads(d);
  nn::utils::clip_grad_value_(p, 3.5);
  CHECK(grad_values(p[0]) == std::vector<double>{3, -3.5});
  CHECK(grad_values(p[1]) == std::vector<double>{3.5});
  CHECK_FALSE(p[2].grad().defined());
  REQUIRE_THROWS_AS(nn::utils::clip_grad_value_(p, -1), ValueError);
}

TEST_CASE("clamp keeps NaN, gives max when min > max, and passes gradients inside",
          "[nn][clip]") {
  const Tensor x = from_vector(std::vector<double>{-2, 0.5, std::nan(""), 3}, {4},
                               TensorOptions().dtype(DType::kFloat64))
                       .requires_grad_();
  const std::vector<double> y = clamp(x, -1.0, 1.0).to_vector<double>();
  CHECK(y[0] == -1);
  CHECK(y[1] == 0.5);
  CHECK(std::isnan(y[2]));
  CHECK(y[3] == 1);
  CHECK(clamp(x, 2.0, 1.0).to_vector<double>()[1] == 1);  // min > max: max
  sum(clamp(x, -2.0, 1.0)).backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  CHECK(g == std::vector<double>{1, 1, 0, 0} );  // -2 is on the bound: inclusive; NaN: 0
  REQUIRE_THROWS_WITH(clamp(x, std::nullopt, std::nullopt),
                      Catch::Contains("at least one of min and max"));
}

}  // namespace
}  // namespace streamgrad

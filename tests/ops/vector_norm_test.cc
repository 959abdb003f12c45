// norm and baddbmm (ops/vector_norm.cc) against values worked by hand, with the
// reference's choices where the chain rule is undefined (the gradcheck catalogue checks
// their gradients numerically).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::input;
using testing::test_device;
using testing::values;

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> grad_of(const Tensor& t) { return values(t.grad()); }

TEST_CASE("norm gives the p-norms of the reference", "[ops][norm]") {
  const Device d = test_device();
  const Tensor x = input({3, -4, 0, 0}, {2, 2}, d, false);
  CHECK(norm(x).item<double>() == 5);
  CHECK(norm(x, 1).item<double>() == 7);
  CHECK(norm(x, kInf).item<double>() == 4);
  CHECK(norm(x, -kInf).item<double>() == 0);
  CHECK(norm(x, 0).item<double>() == 2);
  CHECK(norm(x, 3).item<double>() == Approx(std::cbrt(27.0 + 64.0)));
  const Tensor rows = norm(x, 2, {1});
  CHECK(rows.sizes() == Shape({2}));
  CHECK(values(rows) == std::vector<double>{5, 0});
  CHECK(norm(x, 2, {1}, true).sizes() == Shape({2, 1}));
  CHECK(norm(x, 2, {0, 1}).sizes() == Shape({}));
}

TEST_CASE("norm's gradient where the chain rule is undefined", "[ops][norm]") {
  const Device d = test_device();
  {
    const Tensor x = input({0, 0, 3, 4}, {2, 2}, d);
    sum(norm(x, 2, {1})).backward();  // row 0 has norm 0: gradient 0, not NaN
    const std::vector<double> g = grad_of(x);
    CHECK(g[0] == 0);
    CHECK(g[1] == 0);
    CHECK(g[2] == Approx(0.6));
    CHECK(g[3] == Approx(0.8));
  }
  {
    const Tensor x = input({2, -2, 1}, {3}, d);
    norm(x, kInf).backward();  // two elements attain the maximum: half each
    CHECK(grad_of(x) == std::vector<double>{0.5, -0.5, 0});
  }
  {
    const Tensor x = input({0, -3, 2}, {3}, d);
    norm(x, 1).backward();  // sign, 0 at 0
    CHECK(grad_of(x) == std::vector<double>{0, -1, 1});
  }
  {
    const Tensor x = input({0, -3, 2}, {3}, d);
    norm(x, 0).backward();
    CHECK(grad_of(x) == std::vector<double>{0, 0, 0});
  }
}

TEST_CASE("norm refuses what it cannot compute", "[ops][norm][errors]") {
  const Device d = test_device();
  const Tensor empty = zeros({0}, testing::f64(d));
  CHECK(norm(empty).item<double>() == 0);
  REQUIRE_THROWS_WITH(norm(empty, kInf), Catch::Contains("norm: the inf norm of an empty"));
  REQUIRE_THROWS_WITH(norm(input({1, 2}, {2}, d), 2, {3}), Catch::Contains("norm"));
  const Tensor ints = zeros({2}, TensorOptions().dtype(DType::kInt64).device(d));
  REQUIRE_THROWS_WITH(norm(ints), Catch::Contains("norm"));
}

TEST_CASE("baddbmm is beta input + alpha batch1 @ batch2", "[ops][matmul]") {
  const Device d = test_device();
  const Tensor a = input({1, 2, 3, 4}, {1, 2, 2}, d, false);
  const Tensor b = input({1, 0, 0, 1}, {1, 2, 2}, d, false);
  const Tensor bias = input({10, 20}, {2}, d, false);  // broadcast over batch and rows
  CHECK(values(baddbmm(bias, a, b, 0.5, 2)) == std::vector<double>{7, 14, 11, 18});
  const Tensor nan = input({std::nan(""), kInf}, {2}, d, false);
  CHECK(values(baddbmm(nan, a, b, 0, 1)) == std::vector<double>{1, 2, 3, 4});  // input unread
  REQUIRE_THROWS_WITH(baddbmm(input({1, 2, 3}, {3}, d, false), a, b),
                      Catch::Contains("baddbmm: shapes [3] and [1, 2, 2] cannot be broadcast"));
}

}  // namespace
}  // namespace streamgrad

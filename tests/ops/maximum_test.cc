// maximum and minimum: values (broadcasting, NaN in either operand, int64, mixed floating
// dtypes), the gradient to the winner and split half and half at ties (by hand and
// against central differences, first and second order), methods and errors. Behaviours
// follow PyTorch's maximum/minimum (test_binary_ufuncs.py, derivatives.yaml), ported.
#include <cmath>
#include <limits>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST_CASE("maximum and minimum pick element-wise, broadcast and propagate NaN",
          "[ops][maximum]") {
  const Device d = test_device();
  const Tensor a = input({1, 5, -2, 4, 0, 3}, {2, 3}, d);
  const Tensor b = input({2, 5, -3}, {3}, d);
  check_values(maximum(a, b), {2, 5, -2, 4, 5, 3});
  check_values(minimum(a, b), {1, 5, -3, 2, 0, -3});
  CHECK(maximum(b, a).sizes() == Shape{2, 3});
  check_values(a.maximum(b), values(maximum(a, b)));
  check_values(b.minimum(a), values(minimum(a, b)));
  const std::vector<double> mx = values(maximum(input({kNaN, 1, kNaN}, {3}, d),
                                                input({1, kNaN, kNaN}, {3}, d)));
  const std::vector<double> mn = values(minimum(input({kNaN, 1, 2}, {3}, d),
                                                input({1, kNaN, 0}, {3}, d)));
  CHECK(std::isnan(mx[0]));
  CHECK(std::isnan(mx[1]));
  CHECK(std::isnan(mx[2]));
  CHECK(std::isnan(mn[0]));
  CHECK(std::isnan(mn[1]));
  CHECK(mn[2] == 0);
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(d);
  const Tensor m = maximum(from_vector<int64_t>({1, 7}, {2}, i64), from_vector<int64_t>({3, 2}, {2}, i64));
  CHECK(m.dtype() == DType::kInt64);
  CHECK(m.to_vector<int64_t>() == std::vector<int64_t>{3, 7});
  // float32 and float64 meet in float64.
  const Tensor f = from_vector<float>({1.5f, -1}, {2}, TensorOptions().device(d));
  const Tensor p = minimum(f, input({1, 0}, {2}, d, false));
  CHECK(p.dtype() == DType::kFloat64);
  check_values(p, {1, -1});
}

TEST_CASE("the gradient goes to the winner, half to each at a tie, all to both at NaN",
          "[ops][maximum]") {
  const Device d = test_device();
  {
    const Tensor a = input({1, 5, 3, kNaN}, {4}, d);
    const Tensor b = input({2, 4, 3, 0}, {4}, d);
    sum(maximum(a, b)).backward();
    check_values(a.grad(), {0, 1, 0.5, 1});
    check_values(b.grad(), {1, 0, 0.5, 1});
  }
  {
    // b broadcast over rows: its gradient sums them.
    const Tensor a = input({1, 2, 3, 4}, {2, 2}, d);
    const Tensor b = input({2, 0}, {2}, d);
    sum(minimum(a, b)).backward();
    check_values(a.grad(), {1, 0, 0, 0});
    check_values(b.grad(), {1, 2});
  }
  const Tensor a = random_input({2, 3}, d, 1);
  const Tensor b = random_input({3}, d, 2);
  check_gradients([](const TensorList& t) { return maximum(t[0], t[1]); }, {a, b});
  check_gradients([](const TensorList& t) { return minimum(t[0], t[1]); }, {a, b});
  check_second_order([](const TensorList& t) { return mul(maximum(t[0], t[1]), t[0]); }, {a, b});
  check_second_order([](const TensorList& t) { return mul(minimum(t[0], t[1]), t[1]); }, {a, b});
}

TEST_CASE("maximum and minimum reject shapes that do not broadcast and mixed dtypes",
          "[ops][maximum]") {
  const Device d = test_device();
  expect_error<ValueError>([&] { maximum(input({1, 2}, {2}, d), input({1, 2, 3}, {3}, d)); },
                           {"maximum", "[2]", "[3]", "broadcast"});
  const Tensor i = from_vector<int64_t>({1, 2}, {2}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>([&] { minimum(input({1, 2}, {2}, d), i); }, {"minimum", "int64"});
  expect_error<ValueError>([&] { maximum(Tensor(), i); }, {"maximum"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

// adaptive_avg_pool2d (ops/adaptive_pool.cc) and nn::AdaptiveAvgPool2d: values written out
// by hand for overlapping windows (floor(i H / oh) .. ceil((i + 1) H / oh)), grids larger
// than the input, global pooling, batched and unbatched inputs, 16-bit inputs; gradients
// against central differences, first and second order, and one by hand; errors.
// Behaviours follow the reference's adaptive pooling tests (test_pooling.py), ported.
#include "nn/layers.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

std::vector<double> iota(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i + 1);
  return v;
}

TEST_CASE("adaptive_avg_pool2d averages the reference's windows", "[ops][adaptive_pool]") {
  const Device d = test_device();
  const Tensor x = input(iota(12), {1, 1, 3, 4}, d);
  // Rows {0,1}, {1,2}; columns {0,1}, {1,2}, {2,3}.
  const Tensor y = adaptive_avg_pool2d(x, {2, 3});
  CHECK(y.sizes() == Shape{1, 1, 2, 3});
  check_values(y, {3.5, 4.5, 5.5, 7.5, 8.5, 9.5});
  // Unbatched, and a grid larger than the input: rows {0}, {0,1}, {1}.
  const Tensor u = input({1, 3, 10, 30}, {2, 2, 1}, d);
  const Tensor z = adaptive_avg_pool2d(u, {3, 1});
  CHECK(z.sizes() == Shape{2, 3, 1});
  check_values(z, {1, 2, 3, 10, 20, 30});
  // Global pooling is the mean of each plane; the identity grid copies.
  const Tensor b = random_input({2, 3, 5, 7}, d, 4);
  check_values(adaptive_avg_pool2d(b, {1, 1}), values(mean(b, {2, 3}, true)), 1e-12);
  check_values(adaptive_avg_pool2d(b, {5, 7}), values(b), 1e-15);
  // Uneven windows: 5 rows into 3 cells are rows {0,1}, {1,2,3}, {3,4}.
  const Tensor c = input({1, 2, 3, 4, 5}, {1, 5, 1}, d);
  check_values(adaptive_avg_pool2d(c, {3, 1}), {1.5, 3, 4.5});
  CHECK(adaptive_avg_pool2d(input({}, {0, 2, 3, 3}, d), {2, 2}).sizes() == Shape{0, 2, 2, 2});
  // 16-bit inputs keep their dtype (averaged in float32).
  const Tensor h = to(x, DType::kFloat16);
  const Tensor hy = adaptive_avg_pool2d(h, {2, 3});
  CHECK(hy.dtype() == DType::kFloat16);
  check_values(to(hy, DType::kFloat64), {3.5, 4.5, 5.5, 7.5, 8.5, 9.5});
}

TEST_CASE("the gradient of adaptive_avg_pool2d spreads over each window", "[ops][adaptive_pool]") {
  const Device d = test_device();
  const Tensor x = input(iota(3), {1, 3, 1}, d);
  // Rows {0,1} and {1,2}: the middle row gets half of each.
  adaptive_avg_pool2d(x, {2, 1}).backward(input({2, 4}, {1, 2, 1}, d, false));
  check_values(x.grad(), {1, 3, 2});
  check_gradients([](const TensorList& t) { return adaptive_avg_pool2d(t[0], {2, 3}); },
                  {random_input({2, 1, 3, 5}, d, 1)});
  check_gradients([](const TensorList& t) { return adaptive_avg_pool2d(t[0], {4, 2}); },
                  {random_input({2, 3, 3}, d, 2)});
  check_second_order(
      [](const TensorList& t) {
        const Tensor y = adaptive_avg_pool2d(t[0], {2, 2});
        return mul(y, y);
      },
      {random_input({1, 2, 3, 3}, d, 3)});
}

TEST_CASE("nn::AdaptiveAvgPool2d pools to its grid", "[ops][adaptive_pool]") {
  const Device d = test_device();
  nn::AdaptiveAvgPool2d square(1);
  CHECK(square.output_size == std::array<int64_t, 2>{1, 1});
  const Tensor x = random_input({2, 3, 4, 6}, d, 5);
  check_values(square.forward(x), values(mean(x, {2, 3}, true)), 1e-12);
  nn::AdaptiveAvgPool2d grid(std::array<int64_t, 2>{2, 3});
  CHECK(grid.forward(x).sizes() == Shape{2, 3, 2, 3});
  CHECK(std::dynamic_pointer_cast<nn::AdaptiveAvgPool2d>(grid.blank_copy())->output_size ==
        grid.output_size);
  CHECK(grid.parameters().empty());
}

TEST_CASE("adaptive_avg_pool2d rejects bad shapes", "[ops][adaptive_pool]") {
  const Device d = test_device();
  expect_error<ValueError>([&] { adaptive_avg_pool2d(input(iota(4), {2, 2}, d), {1, 1}); },
                           {"adaptive_avg_pool2d", "[N, C, H, W]", "[2, 2]"});
  expect_error<ValueError>([&] { adaptive_avg_pool2d(input({}, {1, 2, 0, 3}, d), {1, 1}); },
                           {"adaptive_avg_pool2d", "empty dim 2"});
  expect_error<ValueError>([&] { adaptive_avg_pool2d(input(iota(4), {1, 2, 2}, d), {-1, 1}); },
                           {"adaptive_avg_pool2d", "-1", "negative"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

// cumsum (values against running sums written out here, every dim, 0-dim and size-1
// dims, non-contiguous inputs, long dims), its gradient (the reverse running sum, by hand
// and against central differences, first and second order), errors; and arange(end),
// the one-argument form of the factory. Behaviours follow PyTorch's cumsum / arange
// (test_reductions.py, test_tensor_creation_ops.py), ported.
#include <cmath>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("cumsum gives running sums along a dim", "[ops][cumsum]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  check_values(cumsum(x, 1), {1, 3, 6, 4, 9, 15});
  check_values(cumsum(x, -1), {1, 3, 6, 4, 9, 15});
  check_values(cumsum(x, 0), {1, 2, 3, 5, 7, 9});
  check_values(x.cumsum(0), values(cumsum(x, 0)));
  CHECK(cumsum(x, 1).sizes() == Shape{2, 3});
  // Non-contiguous input.
  check_values(contiguous(cumsum(transpose(x, 0, 1), 0)), {1, 4, 3, 9, 6, 15});
  // 0-dim and size-1 dims: a copy, not the input itself.
  const Tensor s = input({2.5}, {}, d);
  const Tensor cs = cumsum(s, 0);
  check_values(cs, {2.5});
  CHECK_FALSE(cs.is_same(s));
  check_values(cumsum(input({7}, {1}, d), -1), {7});
  CHECK(cumsum(input({}, {0, 2}, d), 0).sizes() == Shape{0, 2});
  // A long dim, not a power of two: every element against a sequential double sum.
  const int64_t n = 37;
  std::vector<double> v(n), want(n);
  double run = 0;
  for (int64_t i = 0; i < n; ++i) {
    v[i] = std::sin(static_cast<double>(i));
    run += v[i];
    want[i] = run;
  }
  check_values(cumsum(input(v, {n}, d), 0), want, 1e-12);
  // float32 keeps its dtype.
  const Tensor f = from_vector<float>({1, 2, 3}, {3}, TensorOptions().device(d));
  CHECK(cumsum(f, 0).dtype() == DType::kFloat32);
  CHECK(cumsum(f, 0).to_vector<float>() == std::vector<float>{1, 3, 6});
}

TEST_CASE("the gradient of cumsum is the reverse running sum", "[ops][cumsum]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5}, {5}, d);
  cumsum(x, 0).backward(input({1, 2, 3, 4, 5}, {5}, d, false));
  check_values(x.grad(), {15, 14, 12, 9, 5});
  check_gradients([](const TensorList& t) { return cumsum(t[0], 1); },
                  {random_input({2, 7, 2}, d, 1)});
  check_gradients([](const TensorList& t) { return cumsum(t[0], 0); },
                  {random_input({5, 3}, d, 2)});
  check_second_order([](const TensorList& t) { return mul(cumsum(t[0], 0), t[0]); },
                     {random_input({6}, d, 3)});
}

TEST_CASE("cumsum rejects bad dims and non-floating inputs", "[ops][cumsum]") {
  const Device d = test_device();
  expect_error<ValueError>([&] { cumsum(input({1, 2}, {2}, d), 1); }, {"cumsum", "1"});
  const Tensor i = from_vector<int64_t>({1, 2}, {2}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>([&] { cumsum(i, 0); }, {"cumsum", "int64"});
}

TEST_CASE("arange(end) counts from 0 in steps of 1", "[ops][cumsum]") {
  const Device d = test_device();
  check_values(arange(5, f64(d)), {0, 1, 2, 3, 4});
  check_values(arange(2.5, f64(d)), {0, 1, 2});
  CHECK(arange(0, f64(d)).numel() == 0);
  CHECK(arange(-3, f64(d)).numel() == 0);
  CHECK(arange(4).dtype() == DType::kFloat32);
  CHECK(arange(3, TensorOptions().dtype(DType::kInt64).device(d)).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2});
  // The running sum of ones is arange shifted by one.
  check_values(cumsum(ones({4}, f64(d)), 0), values(add(arange(4, f64(d)), 1.0)));
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

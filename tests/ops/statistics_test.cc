// var, std and logsumexp: values against double-precision sums written out here (every
// correction, dims, keepdim, 0-dim and degenerate inputs), std's zero gradient at zero
// spread, logsumexp's stability (large, -inf and +inf inputs) and softmax gradient,
// gradients against central differences (first and second order), methods and errors.
// Behaviours follow PyTorch's var/std/logsumexp (test_reductions.py, derivatives.yaml),
// ported, not copied.
#include <cmath>
#include <limits>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The variance of `v` with `correction`, in double precision.
double ref_var(const std::vector<double>& v, double correction) {
  double m = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / (static_cast<double>(v.size()) - correction);
}

TEST_CASE("var and std over all elements and over dims, with correction and keepdim",
          "[ops][statistics]") {
  const Device d = test_device();
  const std::vector<double> v = {1, 2, 3, 4, 5, 7};
  const Tensor x = input(v, {2, 3}, d);
  check_values(var(x), {ref_var(v, 1)});
  CHECK(var(x).dim() == 0);
  check_values(streamgrad::std(x), {std::sqrt(ref_var(v, 1))});
  check_values(var(x, {}, 0), {ref_var(v, 0)});
  check_values(var(x, {1}), {ref_var({1, 2, 3}, 1), ref_var({4, 5, 7}, 1)});
  check_values(var(x, {-1}, 0), {ref_var({1, 2, 3}, 0), ref_var({4, 5, 7}, 0)});
  check_values(var(x, {0}, 1, true), {4.5, 4.5, 8});
  CHECK(var(x, {0}, 1, true).sizes() == Shape{1, 3});
  CHECK(var(x, {0, 1}).sizes() == Shape{});
  check_values(var(x, {0, 1}), {ref_var(v, 1)});
  check_values(streamgrad::std(x, {1}, 0.5),
               {std::sqrt(ref_var({1, 2, 3}, 0.5)), std::sqrt(ref_var({4, 5, 7}, 0.5))});
  // Methods.
  check_values(x.var(), values(var(x)));
  check_values(x.var({1}, 0, true), values(var(x, {1}, 0, true)));
  check_values(x.std(), values(streamgrad::std(x)));
  check_values(x.std({0}), values(streamgrad::std(x, {0})));
  // A constant row has zero spread; large offsets do not cost precision (the mean is
  // subtracted before squaring).
  check_values(var(input({1e8 + 1, 1e8 + 2, 1e8 + 3}, {3}, d)), {1.0}, 1e-9);
}

TEST_CASE("var with N <= correction divides by zero as the reference", "[ops][statistics]") {
  const Device d = test_device();
  // One element, correction 1: 0 / 0.
  CHECK(std::isnan(values(var(input({3}, {1}, d)))[0]));
  CHECK(std::isnan(values(var(input({3}, {}, d)))[0]));
  // Two distinct elements, correction 2: positive / 0.
  CHECK(values(var(input({1, 2}, {2}, d), {}, 2))[0] == kInf);
  CHECK(values(var(input({2}, {}, d), {}, 0))[0] == 0);
}

TEST_CASE("the gradient of var is 2 (x - mean) / (N - correction); std's is zero at zero spread",
          "[ops][statistics]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 6}, {4}, d);
  var(x).backward();
  check_values(x.grad(), {2 * (1 - 3.0) / 3, 2 * (2 - 3.0) / 3, 0, 2 * (6 - 3.0) / 3});
  // std over rows, one of them constant: its gradient is 0, not NaN.
  const Tensor y = input({5, 5, 5, 1, 2, 3}, {2, 3}, d);
  const Tensor s = streamgrad::std(y, {1});
  check_values(s, {0, 1});
  s.backward(ones_like(s));
  check_values(y.grad(), {0, 0, 0, -0.5, 0, 0.5});
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, {0}, {1, -1}}) {
    for (double c : {0.0, 1.0}) {
      check_gradients([&](const TensorList& t) { return var(t[0], dims, c); },
                      {random_input({2, 3, 2}, d, 1)});
      check_gradients([&](const TensorList& t) { return streamgrad::std(t[0], dims, c, true); },
                      {random_input({2, 3, 2}, d, 2)});
    }
  }
  check_second_order([](const TensorList& t) { return var(t[0], {1}); },
                     {random_input({2, 3}, d, 3)});
  check_second_order([](const TensorList& t) { return streamgrad::std(t[0], {0}); },
                     {random_input({3, 2}, d, 4)}, 1e-6, 1e-5, 1e-5);
  check_second_order([](const TensorList& t) { return streamgrad::std(t[0]); },
                     {random_input({4}, d, 5)}, 1e-6, 1e-5, 1e-5);
}

TEST_CASE("logsumexp is log(sum(exp(x))) over dims, stable for large and infinite inputs",
          "[ops][statistics]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, -1, 0, 4}, {2, 3}, d);
  const auto lse = [](std::vector<double> v) {
    double s = 0;
    for (double e : v) s += std::exp(e);
    return std::log(s);
  };
  check_values(logsumexp(x, {1}), {lse({1, 2, 3}), lse({-1, 0, 4})});
  check_values(logsumexp(x, {0}, true), {lse({1, -1}), lse({2, 0}), lse({3, 4})});
  CHECK(logsumexp(x, {0}, true).sizes() == Shape{1, 3});
  check_values(logsumexp(x, {}), {lse({1, 2, 3, -1, 0, 4})});
  check_values(logsumexp(x, {0, 1}), {lse({1, 2, 3, -1, 0, 4})});
  check_values(x.logsumexp({1}), values(logsumexp(x, {1})));
  // No overflow: exp(1000) is inf in double.
  check_values(logsumexp(input({1000, 1000, -1000}, {3}, d), {0}), {1000 + std::log(2.0)});
  // No underflow to log 0.
  check_values(logsumexp(input({-1000, -1000}, {2}, d), {0}), {-1000 + std::log(2.0)});
  const std::vector<double> inf = values(logsumexp(
      input({-kInf, -kInf, kInf, 1, -kInf, 2}, {3, 2}, d), {1}));
  CHECK(inf[0] == -kInf);
  CHECK(inf[1] == kInf);
  CHECK(inf[2] == Approx(2.0).epsilon(1e-12));  // exp(-inf) adds nothing
  // 0-dim: itself.
  check_values(logsumexp(input({0.5}, {}, d), {}), {0.5});
  // An empty reduction: log 0.
  CHECK(values(logsumexp(input({}, {0, 2}, d), {0}))[0] == -kInf);
}

TEST_CASE("the gradient of logsumexp is g softmax(x)", "[ops][statistics]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 1000, 1000, 0}, {2, 3}, d);
  sum(logsumexp(x, {1})).backward();
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  check_values(x.grad(), {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 0.5, 0.5, 0});
  check_gradients([](const TensorList& t) { return logsumexp(t[0], {0, 2}); },
                  {random_input({2, 3, 2}, d, 6, -3, 3)});
  check_gradients([](const TensorList& t) { return logsumexp(t[0], {-1}, true); },
                  {random_input({3, 4}, d, 7, -3, 3)});
  check_second_order([](const TensorList& t) { return logsumexp(t[0], {1}); },
                     {random_input({2, 3}, d, 8)});
}

TEST_CASE("var, std and logsumexp reject bad dims and non-floating inputs", "[ops][statistics]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4}, {2, 2}, d);
  expect_error<ValueError>([&] { var(x, {2}); }, {"var", "2"});
  expect_error<ValueError>([&] { streamgrad::std(x, {0, 0}); }, {"std", "twice"});
  expect_error<ValueError>([&] { logsumexp(x, {-3}); }, {"logsumexp", "-3"});
  const Tensor i = from_vector<int64_t>({1, 2}, {2}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>([&] { var(i); }, {"var", "int64"});
  expect_error<ValueError>([&] { logsumexp(i, {0}); }, {"logsumexp", "int64"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

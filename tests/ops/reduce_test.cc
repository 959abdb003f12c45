// sum, mean, max, min: values, shapes with and without keepdim, gradients (first and
// second order, non-contiguous inputs), errors.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("reduction forward values", "[ops][reduce]") {
  const Device d = test_device();
  // [[1, 5, 3], [4, 2, 6]]
  const Tensor a = input({1, 5, 3, 4, 2, 6}, {2, 3}, d, false);
  check_values(sum(a), {21});
  CHECK(sum(a).dim() == 0);
  check_values(sum(a, {1}), {9, 12});
  CHECK(sum(a, {0}, true).sizes() == Shape{1, 3});
  check_values(mean(a), {3.5});
  CHECK(mean(a).dim() == 0);
  check_values(mean(a, {0}), {2.5, 3.5, 4.5});
  check_values(mean(a, {-1}, true), {3, 4});
  CHECK(mean(a, {-1}, true).sizes() == Shape{2, 1});
  check_values(mean(a, {0, 1}), {3.5});

  auto [mx, imx] = max(a, 1);
  check_values(mx, {5, 6});
  CHECK(imx.dtype() == DType::kInt64);
  CHECK(imx.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  auto [mn, imn] = min(a, 0, true);
  CHECK(mn.sizes() == Shape{1, 3});
  check_values(mn, {1, 2, 3});
  CHECK(imn.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  // Ties pick the first index.
  auto [tv, ti] = max(input({2, 7, 7, 1}, {4}, d, false), 0);
  CHECK(tv.item<double>() == 7);
  CHECK(ti.item<int64_t>() == 1);
  // 0-dim input.
  auto [sv, si] = min(input({3}, {}, d, false), 0);
  CHECK(sv.dim() == 0);
  CHECK(sv.item<double>() == 3);
  CHECK(si.item<int64_t>() == 0);
  // Transposed input.
  auto [tmx, timx] = max(transpose(a, 0, 1), 1);
  check_values(tmx, {4, 5, 6});
  CHECK(timx.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
}

TEST_CASE("reduction gradients", "[ops][reduce][grad]") {
  const Device d = test_device();
  const Tensor a = random_input({2, 3, 4}, d, 21, -2, 2, /*gap=*/0.05);
  const Tensor t = random_input({4, 3}, d, 22, -2, 2, 0.05);

  SECTION("sum") {
    check_gradients([](const TensorList& x) { return sum(x[0]); }, {a});
    check_gradients([](const TensorList& x) { return sum(x[0], {0, 2}); }, {a});
    check_gradients([](const TensorList& x) { return sum(x[0], {-1}, true); }, {a});
    check_gradients([](const TensorList& x) { return sum(transpose(x[0], 0, 1), {1}); }, {t});
    check_second_order([](const TensorList& x) { return sum(mul(x[0], x[0]), {1}); }, {a});
  }
  SECTION("mean") {
    check_gradients([](const TensorList& x) { return mean(x[0]); }, {a});
    check_gradients([](const TensorList& x) { return mean(x[0], {1}); }, {a});
    check_gradients([](const TensorList& x) { return mean(x[0], {0, -1}, true); }, {a});
    check_gradients([](const TensorList& x) { return mean(transpose(x[0], 0, 1), {0}); }, {t});
    check_second_order([](const TensorList& x) { return mean(mul(x[0], x[0]), {2}); }, {a});
    check_second_order([](const TensorList& x) { return mul(mean(x[0]), mean(x[0])); }, {a});
  }
  SECTION("max and min") {
    for (bool keepdim : {false, true}) {
      for (int64_t dim : {0, 1, -1}) {
        INFO("dim " << dim << " keepdim " << keepdim);
        check_gradients([=](const TensorList& x) { return max(x[0], dim, keepdim).first; }, {a});
        check_gradients([=](const TensorList& x) { return min(x[0], dim, keepdim).first; }, {a});
        check_second_order(
            [=](const TensorList& x) { return max(mul(x[0], x[0]), dim, keepdim).first; }, {a});
        check_second_order(
            [=](const TensorList& x) { return mul(min(x[0], dim, keepdim).first, 3.0); }, {a});
      }
    }
    check_gradients([](const TensorList& x) { return max(transpose(x[0], 0, 1), 0).first; }, {t});
    check_gradients([](const TensorList& x) { return min(slice(x[0], 0, 1, 4, 2), 1).first; }, {t});
    // 0-dim.
    const Tensor s = input({0.7}, {}, d);
    check_gradients([](const TensorList& x) { return max(x[0], 0).first; }, {s});
    check_second_order([](const TensorList& x) { return pow(min(x[0], -1, true).first, 3); }, {s});
  }
}

TEST_CASE("reduction errors", "[ops][reduce][errors]") {
  const Tensor a = zeros({2, 3});
  expect_error<ValueError>([&] { mean(a, {2}); }, {"mean", "dimension 2", "rank 2"});
  expect_error<ValueError>([&] { mean(a, {1, -1}); }, {"mean", "twice"});
  expect_error<ValueError>([&] { sum(a, {-3}); }, {"sum", "out of range"});
  expect_error<ValueError>([&] { max(a, 2); }, {"max", "dimension 2", "rank 2"});
  expect_error<ValueError>([&] { min(a, -3); }, {"min", "out of range"});
  expect_error<ValueError>([&] { max(slice(a, 1, 0, 0), 1); }, {"max", "empty"});
  const Tensor i = zeros({3}, TensorOptions().dtype(DType::kInt64));
  expect_error<ValueError>([&] { mean(i); }, {"mean", "int64"});
  expect_error<ValueError>([&] { max(i, 0); }, {"max", "int64"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

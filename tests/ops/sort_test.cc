// topk, sort and argsort (ops/sort.cc): values and indices written out by hand for ties
// (lower index first), NaN (larger than every number), every dim and non-contiguous
// inputs, 0-dim and empty results, float16 / bfloat16 / int64 inputs; the gradient (the
// incoming gradient at the selected positions) by hand and against central differences,
// first and second order; errors. Behaviours follow the reference's test_sort_and_select.py,
// ported.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// Values with NaN compared as equal to NaN.
void check_with_nan(const Tensor& t, const std::vector<double>& want) {
  const std::vector<double> got = values(t);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK((std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]));
  }
}

TEST_CASE("topk picks the k largest or smallest, ties in index order", "[ops][sort]") {
  const Device d = test_device();
  const Tensor x = input({1, 3, 2, 3, 0}, {5}, d);
  auto [v, i] = topk(x, 2);
  check_values(v, {3, 3});
  CHECK(ints(i) == std::vector<int64_t>{1, 3});
  CHECK(i.dtype() == DType::kInt64);
  std::tie(v, i) = topk(x, 3, 0, /*largest=*/false);
  check_values(v, {0, 1, 2});
  CHECK(ints(i) == std::vector<int64_t>{4, 0, 2});
  // Every element, and none.
  std::tie(v, i) = topk(x, 5);
  check_values(v, {3, 3, 2, 1, 0});
  CHECK(ints(i) == std::vector<int64_t>{1, 3, 2, 0, 4});
  std::tie(v, i) = topk(x, 0);
  CHECK(v.sizes() == Shape{0});
  CHECK(i.sizes() == Shape{0});
  // Along dim 0 of a matrix, and of its transpose (non-contiguous).
  const Tensor m = input({5, 1, 4, 2, 6, 3}, {2, 3}, d);
  std::tie(v, i) = topk(m, 1, 0);
  CHECK(v.sizes() == Shape{1, 3});
  check_values(v, {5, 6, 4});
  CHECK(ints(i) == std::vector<int64_t>{0, 1, 0});
  std::tie(v, i) = topk(transpose(m, 0, 1), 2, -1, true, /*sorted=*/false);
  CHECK(v.sizes() == Shape{3, 2});
  check_values(v, {5, 2, 6, 1, 4, 3});
  CHECK(ints(i) == std::vector<int64_t>{0, 1, 1, 0, 0, 1});
}

TEST_CASE("NaN sorts as larger than every number", "[ops][sort]") {
  const Device d = test_device();
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = input({1, kNaN, inf, kNaN, -inf}, {5}, d, false);
  auto [v, i] = topk(x, 3);
  check_with_nan(v, {kNaN, kNaN, inf});
  CHECK(ints(i) == std::vector<int64_t>{1, 3, 2});
  std::tie(v, i) = topk(x, 2, -1, /*largest=*/false);
  check_with_nan(v, {-inf, 1});
  CHECK(ints(i) == std::vector<int64_t>{4, 0});
  std::tie(v, i) = sort(x);
  check_with_nan(v, {-inf, 1, inf, kNaN, kNaN});
  CHECK(ints(i) == std::vector<int64_t>{4, 0, 2, 1, 3});
  std::tie(v, i) = sort(x, 0, /*descending=*/true);
  check_with_nan(v, {kNaN, kNaN, inf, 1, -inf});
  CHECK(ints(i) == std::vector<int64_t>{1, 3, 2, 0, 4});
}

TEST_CASE("sort and argsort order a whole dim, stably", "[ops][sort]") {
  const Device d = test_device();
  // Rows with repeated values: equal values keep their order both ways.
  const Tensor x = input({2, 1, 2, 0, 1, 3, 3, 3}, {2, 4}, d);
  auto [v, i] = sort(x);
  check_values(v, {0, 1, 2, 2, 1, 3, 3, 3});
  CHECK(ints(i) == std::vector<int64_t>{3, 1, 0, 2, 0, 1, 2, 3});
  std::tie(v, i) = sort(x, std::optional<bool>(true), 1, /*descending=*/true);
  check_values(v, {2, 2, 1, 0, 3, 3, 3, 1});
  CHECK(ints(i) == std::vector<int64_t>{0, 2, 1, 3, 1, 2, 3, 0});
  std::tie(v, i) = sort(x, 0);
  check_values(v, {1, 1, 2, 0, 2, 3, 3, 3});
  CHECK(ints(i) == std::vector<int64_t>{1, 0, 0, 0, 0, 1, 1, 1});
  CHECK(ints(argsort(x)) == std::vector<int64_t>{3, 1, 0, 2, 0, 1, 2, 3});
  CHECK(ints(argsort(x, std::optional<bool>(true), -1, true)) ==
        std::vector<int64_t>{0, 2, 1, 3, 1, 2, 3, 0});
  CHECK_FALSE(argsort(x).requires_grad());
  // A long dim against std::stable_sort's order.
  const int64_t n = 300;
  std::vector<double> raw(n);
  for (int64_t k = 0; k < n; ++k) raw[k] = std::floor(10 * std::sin(0.37 * k));
  std::vector<int64_t> want(n);
  for (int64_t k = 0; k < n; ++k) want[k] = k;
  std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) { return raw[a] < raw[b]; });
  CHECK(ints(argsort(input(raw, {n}, d, false))) == want);
  // 0-dim: itself, index 0; an empty dim sorts to nothing.
  std::tie(v, i) = sort(input({4.5}, {}, d));
  CHECK(v.dim() == 0);
  check_values(v, {4.5});
  CHECK(ints(i) == std::vector<int64_t>{0});
  CHECK(std::get<0>(sort(input({}, {2, 0}, d))).sizes() == Shape{2, 0});
}

TEST_CASE("sort keeps 16-bit and int64 values exactly", "[ops][sort]") {
  const Device d = test_device();
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    const Tensor x = to(input({0.1, -3.5, 2.25, 0.1}, {4}, d, false), dt);
    auto [v, i] = topk(x, 3);
    CHECK(v.dtype() == dt);
    CHECK(to(v, DType::kFloat64).to_vector<double>() ==
          std::vector<double>{to(x, DType::kFloat64).to_vector<double>()[2],
                              to(x, DType::kFloat64).to_vector<double>()[0],
                              to(x, DType::kFloat64).to_vector<double>()[3]});
    CHECK(ints(i) == std::vector<int64_t>{2, 0, 3});
  }
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(d);
  const Tensor n = from_vector<int64_t>({5, -2, 9, 5, (int64_t(1) << 60)}, {5}, i64);
  auto [v, i] = sort(n, 0, true);
  CHECK(ints(v) == std::vector<int64_t>{int64_t(1) << 60, 9, 5, 5, -2});
  CHECK(ints(i) == std::vector<int64_t>{4, 2, 0, 3, 1});
}

TEST_CASE("the gradient of topk and sort goes to the selected positions", "[ops][sort]") {
  const Device d = test_device();
  const Tensor x = input({3, 1, 2, 5}, {4}, d);
  std::get<0>(topk(x, 2)).backward(input({10, 20}, {2}, d, false));
  check_values(x.grad(), {20, 0, 0, 10});
  const Tensor y = input({3, 1, 2}, {3}, d);
  std::get<0>(sort(y)).backward(input({1, 2, 3}, {3}, d, false));
  check_values(y.grad(), {3, 1, 2});
  const Tensor s = input({1.5}, {}, d);
  std::get<0>(topk(s, 1)).backward();
  check_values(s.grad(), {1});
  // k = 0 of a 0-dim input: an empty result, a zero gradient.
  const Tensor s0 = input({1.5}, {}, d);
  const Tensor none = std::get<0>(topk(s0, 0));
  CHECK(none.sizes() == Shape{0});
  sum(none).backward();
  check_values(s0.grad(), {0});
  auto distinct = [&](uint64_t seed) { return random_input({3, 4}, d, seed, -2, 2, 0.05); };
  check_gradients([](const TensorList& t) { return std::get<0>(topk(t[0], 2, 0)); },
                  {distinct(1)});
  check_gradients([](const TensorList& t) { return std::get<0>(sort(t[0], 1, true)); },
                  {distinct(2)});
  check_second_order(
      [](const TensorList& t) {
        const Tensor v = std::get<0>(topk(t[0], 3, 1, false));
        return mul(v, v);
      },
      {distinct(3)});
}

TEST_CASE("topk and sort reject bad k, dims and dtypes", "[ops][sort]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  expect_error<ValueError>([&] { topk(x, 4); }, {"topk", "k = 4", "0..3"});
  expect_error<ValueError>([&] { topk(x, -1, 0); }, {"topk", "k = -1", "0..2"});
  expect_error<ValueError>([&] { sort(x, 2); }, {"sort", "2"});
  expect_error<ValueError>([&] { argsort(x, -3); }, {"argsort", "-3"});
  const Tensor b =
      from_vector<bool>({true, false}, {2}, TensorOptions().dtype(DType::kBool).device(d));
  expect_error<ValueError>([&] { sort(b); }, {"sort", "bool", "int64"});
  expect_error<ValueError>([&] { topk(b, 1); }, {"topk", "bool"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

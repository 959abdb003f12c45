// cat and stack: values, gradients (first and second order, mixed contiguity, inputs that
// do not require grad), errors.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("cat and stack forward values", "[ops][join]") {
  const Device d = test_device();
  const Tensor a = input({1, 2, 3, 4}, {2, 2}, d, false);
  const Tensor b = input({5, 6}, {1, 2}, d, false);
  const Tensor c = cat({a, b});
  CHECK(c.sizes() == Shape{3, 2});
  check_values(c, {1, 2, 3, 4, 5, 6});
  check_values(cat({a, transpose(a, 0, 1)}, 1), {1, 2, 1, 3, 3, 4, 2, 4});
  check_values(cat({a, slice(a, 1, 0, 0)}, -1), {1, 2, 3, 4});  // an empty piece
  check_values(cat({b}), {5, 6});

  const Tensor s0 = stack({a, a});
  CHECK(s0.sizes() == Shape{2, 2, 2});
  check_values(s0, {1, 2, 3, 4, 1, 2, 3, 4});
  const Tensor s2 = stack({a, mul(a, 10.0)}, -1);
  CHECK(s2.sizes() == Shape{2, 2, 2});
  check_values(s2, {1, 10, 2, 20, 3, 30, 4, 40});
  const Tensor s1 = stack({input({1, 2}, {2}, d, false), input({3, 4}, {2}, d, false)}, 1);
  CHECK(s1.sizes() == Shape{2, 2});
  check_values(s1, {1, 3, 2, 4});
  CHECK(stack({scalar_tensor(1, f64(d)), scalar_tensor(2, f64(d))}).sizes() == Shape{2});
}

TEST_CASE("cat and stack gradients", "[ops][join][grad]") {
  const Device d = test_device();
  const Tensor a = random_input({2, 3}, d, 51);
  const Tensor b = random_input({1, 3}, d, 52);
  const Tensor c = random_input({3, 2}, d, 53);  // used transposed
  const Tensor e = random_input({2, 3}, d, 54);

  check_gradients([](const TensorList& x) { return cat({x[0], x[1]}); }, {a, b});
  check_gradients(
      [](const TensorList& x) {
        return cat({x[0], transpose(x[1], 0, 1), x[0]}, 1);
      },
      {a, c});
  check_gradients([](const TensorList& x) { return cat({x[0], x[1], x[0]}, 0); }, {a, b});
  const Tensor fixed = random_input({2, 3}, d, 55).detach();
  check_gradients([fixed](const TensorList& x) { return cat({fixed, x[0]}, -1); }, {a});
  check_gradients([](const TensorList& x) { return stack({x[0], x[1]}); }, {a, e});
  check_gradients(
      [](const TensorList& x) {
        return stack({x[0], transpose(x[1], 0, 1)}, 2);
      },
      {a, c});
  check_gradients([](const TensorList& x) { return stack({x[0], x[0]}, -1); }, {a});

  check_second_order(
      [](const TensorList& x) {
        return mul(cat({x[0], x[1]}), cat({x[1], x[0]}));
      },
      {a, b});
  check_second_order(
      [](const TensorList& x) {
        return mul(stack({x[0], x[1]}, 1), stack({x[1], x[0]}, 1));
      },
      {a, e});
}

TEST_CASE("cat and stack errors", "[ops][join][errors]") {
  expect_error<ValueError>([] { cat({}); }, {"cat", "non-empty"});
  expect_error<ValueError>(
      [] {
        cat({zeros({2, 3}), zeros({2, 4})});
      },
      {"cat", "float32[2, 4]", "float32[2, 3]", "dimension 0"});
  expect_error<ValueError>([] { cat({zeros({2, 3}), zeros({3})}); }, {"cat", "[3]"});
  expect_error<ValueError>([] { cat({zeros({2}), zeros({2})}, 1); }, {"cat", "out of range"});
  expect_error<ValueError>(
      [] {
        cat({scalar_tensor(1), scalar_tensor(2)});
      },
      {"cat", "zero-dimensional"});
  expect_error<ValueError>(
      [] {
        cat({zeros({2}), zeros({2}, TensorOptions().dtype(DType::kFloat64))});
      },
      {"cat", "float32", "float64"});
  expect_error<DeviceError>(
      [] {
        cat({zeros({2}, TensorOptions().device(Device("sim:0"))),
             zeros({2}, TensorOptions().device(Device("sim:1")))});
      },
      {"cat", "sim:0", "sim:1"});
  expect_error<ValueError>(
      [] {
        stack({zeros({2, 3}), zeros({3, 2})});
      },
      {"stack", "[2, 3]", "[3, 2]"});
  expect_error<ValueError>([] { stack({zeros({2}), zeros({2})}, 2); }, {"stack", "out of range"});
  expect_error<ValueError>([] { stack({}); }, {"stack", "non-empty"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

// add, sub, mul, div (tensor and scalar forms), neg: values, gradients with broadcasting
// and non-contiguous inputs, second order, errors.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("arithmetic forward values", "[ops][arithmetic]") {
  const Device d = test_device();
  const Tensor a = input({1, 2, 3}, {3, 1}, d, false);
  const Tensor b = input({10, 20, 30, 40}, {4}, d, false);
  const Tensor s = add(a, b);  // [3,1] + [4] -> [3,4]
  CHECK(s.sizes() == Shape{3, 4});
  check_values(s, {11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});
  check_values(sub(b, a, 0.5), {9.5, 19.5, 29.5, 39.5, 9, 19, 29, 39, 8.5, 18.5, 28.5, 38.5});
  check_values(mul(a, 2.0), {2, 4, 6});
  check_values(div(a, 2.0), {0.5, 1, 1.5});
  check_values(div(6.0, a), {6, 3, 2});
  check_values(sub(1.0, a), {0, -1, -2});
  check_values(add(a, 1.5), {2.5, 3.5, 4.5});
  check_values(sub(a, 1.0), {0, 1, 2});
  check_values(neg(a), {-1, -2, -3});
  check_values(div(b, a), {10, 20, 30, 40, 5, 10, 15, 20, 10.0 / 3, 20.0 / 3, 10, 40.0 / 3});
  check_values(a * a + 1.0, {2, 5, 10});
  CHECK(s.device() == d);
  CHECK(s.dtype() == DType::kFloat64);
}

TEST_CASE("arithmetic gradients", "[ops][arithmetic][grad]") {
  const Device d = test_device();
  const Tensor a = random_input({3, 4}, d, 1);
  const Tensor b = random_input({3, 4}, d, 2, 0.5, 2.0);  // away from 0 for div
  const Tensor col = random_input({3, 1}, d, 3, 0.5, 2.0);
  const Tensor row = random_input({4}, d, 4, 0.5, 2.0);

  SECTION("add") {
    check_gradients([](const TensorList& x) { return add(x[0], x[1]); }, {a, b});
    check_gradients([](const TensorList& x) { return add(x[0], x[1], -2.5); }, {a, b});
    check_gradients([](const TensorList& x) { return add(x[0], 3.0); }, {a});
  }
  SECTION("sub") {
    check_gradients([](const TensorList& x) { return sub(x[0], x[1]); }, {a, b});
    check_gradients([](const TensorList& x) { return sub(x[0], x[1], 0.25); }, {a, b});
    check_gradients([](const TensorList& x) { return sub(x[0], 3.0); }, {a});
    check_gradients([](const TensorList& x) { return sub(3.0, x[0]); }, {a});
  }
  SECTION("mul and div") {
    check_gradients([](const TensorList& x) { return mul(x[0], x[1]); }, {a, b});
    check_gradients([](const TensorList& x) { return mul(x[0], -1.5); }, {a});
    check_gradients([](const TensorList& x) { return div(x[0], x[1]); }, {a, b});
    check_gradients([](const TensorList& x) { return div(x[0], 4.0); }, {a});
    check_gradients([](const TensorList& x) { return div(2.0, x[0]); }, {b});
    check_gradients([](const TensorList& x) { return neg(x[0]); }, {a});
  }
  SECTION("broadcasting [3,1] op [4] and [3,4] op [4]") {
    check_gradients([](const TensorList& x) { return add(x[0], x[1]); }, {col, row});
    check_gradients([](const TensorList& x) { return sub(x[0], x[1], 2.0); }, {col, row});
    check_gradients([](const TensorList& x) { return mul(x[0], x[1]); }, {col, row});
    check_gradients([](const TensorList& x) { return div(x[0], x[1]); }, {col, row});
    check_gradients([](const TensorList& x) { return div(x[0], x[1]); }, {a, row});
    check_gradients([](const TensorList& x) { return mul(x[1], x[0]); }, {a, col});
  }
  SECTION("non-contiguous inputs") {
    const Tensor t = random_input({4, 3}, d, 5);
    check_gradients([](const TensorList& x) { return mul(transpose(x[0], 0, 1), x[1]); }, {t, b});
    check_gradients(
        [](const TensorList& x) { return div(slice(x[0], 1, 0, 4, 2), slice(x[1], 1, 1, 4, 2)); },
        {a, b});
  }
  SECTION("second order") {
    check_second_order([](const TensorList& x) { return mul(x[0], x[1]); }, {col, row});
    check_second_order([](const TensorList& x) { return div(x[0], x[1]); }, {a, b});
    check_second_order([](const TensorList& x) { return div(1.5, x[0]); }, {b});
    check_second_order([](const TensorList& x) { return mul(mul(x[0], x[0]), x[0]); }, {a});
    check_second_order([](const TensorList& x) { return add(mul(x[0], x[0]), x[1], 0.5); }, {a, b});
  }
}

TEST_CASE("arithmetic errors", "[ops][arithmetic][errors]") {
  const Tensor a = zeros({2, 3});
  const Tensor b = zeros({4});
  expect_error<ValueError>([&] { add(a, b); }, {"add", "[2, 3]", "[4]"});
  expect_error<ValueError>([&] { mul(a, b); }, {"mul", "[2, 3]", "[4]"});
  // Floating dtypes promote (the reference's rule; tests/ops/autocast_test.cc); a
  // floating tensor beside an int64 one is refused.
  CHECK(add(a, zeros({2, 3}, TensorOptions().dtype(DType::kFloat64))).dtype() == DType::kFloat64);
  expect_error<ValueError>(
      [&] {
        add(a, zeros({2, 3}, TensorOptions().dtype(DType::kInt64)));
      },
      {"add", "float32", "int64"});
  expect_error<ValueError>([&] { neg(zeros({2}, TensorOptions().dtype(DType::kInt64))); },
                           {"neg", "int64"});
  expect_error<ValueError>([&] { add(a, Tensor()); }, {"add", "undefined"});
  const Tensor s0 = zeros({2}, TensorOptions().device(Device("sim:0")));
  const Tensor s1 = zeros({2}, TensorOptions().device(Device("sim:1")));
  expect_error<DeviceError>([&] { add(s0, s1); }, {"add", "sim:0", "sim:1"});
  expect_error<DeviceError>([&] { div(s0, zeros({2})); }, {"div", "sim:0", "cpu"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

// index_select: values, gradients with repeated indices (first, second and third order),
// errors.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

Tensor index_of(const std::vector<int64_t>& v, Device d) {
  return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())},
                              TensorOptions().dtype(DType::kInt64).device(d));
}

TEST_CASE("index_select forward values", "[ops][index]") {
  const Device d = test_device();
  const Tensor a = input({0, 1, 2, 3, 4, 5}, {2, 3}, d, false);
  check_values(index_select(a, 1, index_of({2, 0, 2}, d)), {2, 0, 2, 5, 3, 5});
  check_values(index_select(a, 0, index_of({1}, d)), {3, 4, 5});
  check_values(index_select(a, -1, index_of({1}, d)), {1, 4});
  CHECK(index_select(a, 0, index_of({}, d)).sizes() == Shape{0, 3});
  check_values(index_select(transpose(a, 0, 1), 0, index_of({2, 1}, d)), {2, 5, 1, 4});
  const Tensor scalar_index =
      from_vector<int64_t>({1}, {}, TensorOptions().dtype(DType::kInt64).device(d));
  check_values(index_select(a, 0, scalar_index), {3, 4, 5});
  // int64 data works too (not differentiable).
  const Tensor ints =
      from_vector<int64_t>({7, 8, 9}, {3}, TensorOptions().dtype(DType::kInt64).device(d));
  CHECK(index_select(ints, 0, index_of({2, 2}, d)).to_vector<int64_t>() ==
        std::vector<int64_t>{9, 9});
}

TEST_CASE("index_select gradients", "[ops][index][grad]") {
  const Device d = test_device();
  const Tensor a = random_input({3, 4}, d, 61);
  const Tensor idx = index_of({3, 0, 3, 1, 3}, d);  // repeats accumulate
  const Tensor idx0 = index_of({2, 2, 0}, d);
  check_gradients([idx](const TensorList& x) { return index_select(x[0], 1, idx); }, {a});
  check_gradients([idx0](const TensorList& x) { return index_select(x[0], 0, idx0); }, {a});
  check_gradients(
      [idx0](const TensorList& x) { return index_select(transpose(x[0], 0, 1), 1, idx0); }, {a});
  check_second_order(
      [idx](const TensorList& x) {
        return mul(index_select(x[0], 1, idx), index_select(x[0], 1, idx));
      },
      {a});
  check_second_order([idx0](const TensorList& x) { return pow(index_select(x[0], 0, idx0), 3); },
                     {a});

  SECTION("third order: the backward's backward is index_select again") {
    Tensor x = input({1, 2, 3}, {3}, d);
    const Tensor i = index_of({2, 2, 0}, d);
    // f = 2 x2^3 + x0^3; g1 = (3 x0^2, 0, 6 x2^2); sum(g1 * x) = 3 x0^3 + 6 x2^3, whose
    // gradient runs through the backward's backward with x flowing into it.
    Tensor g1 = grad({sum(pow(index_select(x, 0, i), 3))}, {x}, {}, true, true)[0];
    Tensor g2 = grad({sum(mul(g1, x))}, {x}, {}, true, true)[0];
    check_values(g2, {9, 0, 162});
    Tensor g3 = grad({sum(g2)}, {x})[0];
    check_values(g3, {18, 0, 108});
  }
}

TEST_CASE("index_select errors", "[ops][index][errors]") {
  const Tensor a = zeros({2, 3});
  expect_error<ValueError>([&] { index_select(a, 1, zeros({2})); },
                           {"index_select", "int64", "float32[2]"});
  expect_error<ValueError>(
      [&] {
        index_select(a, 1, zeros({2, 1}, TensorOptions().dtype(DType::kInt64)));
      },
      {"index_select", "1-D"});
  expect_error<ValueError>([&] { index_select(a, 2, index_of({0}, Device("cpu"))); },
                           {"index_select", "out of range"});
  // Out-of-range indices are caught before any memory is touched (cpu checks on the host).
  expect_error<ValueError>(
      [&] {
        index_select(a, 1, index_of({0, 3}, Device("cpu")));
      },
      {"index_select", "index 3", "out of range"});
  expect_error<DeviceError>([&] { index_select(a, 1, index_of({0}, Device("sim:0"))); },
                            {"index_select", "cpu", "sim:0"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

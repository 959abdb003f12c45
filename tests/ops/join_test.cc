// cat and stack: values, gradients (first and second order, mixed contiguity, inputs that
// do not require grad), errors, and the cost: one node and one launch per call.
// Behaviours ported from the reference framework's stack tests (negative dim, dim == rank,
// 0-element inputs, mixed requires_grad); mixed dtypes are an error here, where the
// reference promotes.
#include <string>

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

TEST_CASE("stack: negative dim, dim == rank, 0-element and 0-dim inputs", "[ops][join]") {
  const Device d = test_device();
  const Tensor a = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  const Tensor b = input({7, 8, 9, 10, 11, 12}, {2, 3}, d, false);
  // -3 wraps to 0 for rank-2 inputs (stack's rank is the inputs' + 1).
  check_values(stack({a, b}, -3), values(stack({a, b}, 0)));
  // dim == rank appends the new dim last: out[i][j][k] = input k at (i, j).
  const Tensor last = stack({a, b}, 2);
  CHECK(last.sizes() == Shape{2, 3, 2});
  check_values(last, {1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12});
  check_values(stack({a, b}, -1), values(last));
  // Non-contiguous inputs: a transposed and an every-other-column view.
  const Tensor wide = input({1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0}, {2, 6}, d, false);
  const Tensor strided = slice(wide, 1, 0, 6, 2);
  check_values(stack({transpose(a, 0, 1), transpose(strided, 0, 1)}, 1),
               {1, 4, 1, 4, 2, 5, 2, 5, 3, 6, 3, 6});
  // 0-element inputs give a 0-element result of the stacked shape, and a gradient.
  Tensor e0 = zeros({0, 3}, f64(d)).requires_grad_();
  Tensor e1 = zeros({0, 3}, f64(d)).requires_grad_();
  const Tensor empty = stack({e0, e1}, 1);
  CHECK(empty.sizes() == Shape{0, 2, 3});
  sum(empty).backward();
  CHECK(e0.grad().sizes() == Shape{0, 3});
  // 0-dim inputs stack into a vector.
  check_values(stack({scalar_tensor(2, f64(d)), scalar_tensor(5, f64(d))}, -1), {2, 5});
}

TEST_CASE("stack: only inputs that require grad get one", "[ops][join][grad]") {
  const Device d = test_device();
  const Tensor fixed = input({1, 2, 3}, {3}, d, false);
  Tensor x = input({4, 5, 6}, {3}, d, true);
  Tensor y = input({7, 8, 9}, {3}, d, true);
  const Tensor out = stack({fixed, x, fixed, y}, 1);  // [3, 4]
  REQUIRE(out.grad_fn());
  CHECK_FALSE(out.grad_fn()->next_edge(0).valid());
  CHECK_FALSE(out.grad_fn()->next_edge(2).valid());
  sum(mul(out, input({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}, {3, 4}, d, false))).backward();
  CHECK_FALSE(fixed.grad().defined());
  check_values(x.grad(), {2, 2, 2});
  check_values(y.grad(), {4, 4, 4});
  NoGradGuard no_grad;
  CHECK_FALSE(stack({x, y}).requires_grad());
}

TEST_CASE("stack and cat of K inputs are one node and one launch", "[ops][join]") {
  const Device d = test_device();
  const int k = 6;
  TensorList xs;
  for (int i = 0; i < k; ++i) xs.push_back(random_input({2, 3}, d, 60 + i));
  // A non-contiguous leaf.
  xs[2] = transpose(random_input({3, 2}, d, 70), 0, 1).detach().requires_grad_();
  Tensor stacked, joined;
  {
    KernelNames launches;
    stacked = stack(xs, 1);
    CHECK(launches.names == std::vector<std::string>{"stack"});
  }
  {
    KernelNames launches;
    joined = cat(xs, 0);
    CHECK(launches.names == std::vector<std::string>{"cat"});
  }
  for (const Tensor& out : {stacked, joined}) {
    const std::shared_ptr<Node> node = out.grad_fn();
    REQUIRE(node);
    CHECK(node->num_outputs() == static_cast<size_t>(k));
    // Every edge goes straight to a leaf's AccumulateGrad: no per-input node between.
    for (int i = 0; i < k; ++i) CHECK(node->next_edge(i).function->name() == "AccumulateGrad");
  }
  CHECK(stacked.grad_fn()->name() == "StackBackward");
  CHECK(joined.grad_fn()->name() == "CatBackward");
}

TEST_CASE("stack's backward hands each input a view of the gradient", "[ops][join][grad]") {
  const Device d = test_device();
  Tensor a = random_input({2, 3}, d, 81), b = random_input({2, 3}, d, 82);
  const Tensor out = stack({a, b}, 1);
  const Tensor g = random_input({2, 2, 3}, d, 83).detach();
  NoGradGuard no_grad;
  const TensorList grads = out.grad_fn()->apply({g});
  REQUIRE(grads.size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(grads[i].sizes() == Shape{2, 3});
    CHECK(grads[i].storage().id() == g.storage().id());  // no copy
    check_values(grads[i], values(squeeze(narrow(g, 1, i, 1), 1)));
  }
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
        cat({zeros({2}), zeros({2}, TensorOptions().dtype(DType::kInt64))});
      },
      {"cat", "float32", "int64"});
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
  expect_error<ValueError>(
      [] {
        stack({zeros({2}), zeros({2}, TensorOptions().dtype(DType::kInt64))});
      },
      {"stack", "float32", "int64"});
  expect_error<ValueError>([] { stack({zeros({2}), zeros({2})}, -3); }, {"stack", "out of range"});
  expect_error<ValueError>([] { stack({zeros({2}), Tensor()}); },
                           {"stack", "tensor 1", "undefined"});
  expect_error<DeviceError>(
      [] {
        stack({zeros({2}), zeros({2}, TensorOptions().device(Device("sim:0")))});
      },
      {"stack", "cpu", "sim:0"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

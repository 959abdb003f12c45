// scatter_reduce (ops/scatter_reduce.cc) against values worked by hand, as the reference's
// (pytorch/pytorch test/test_scatter_gather_ops.py, tools/autograd/derivatives.yaml
// scatter_reduce.two and FunctionsManual.cpp's scatter_reduce_backward, ported): every
// reduce with and without self, "mean" counting self, positions index does not reach
// keeping self's value, the gradients of self and src for every reduce (amax / amin shared
// evenly among ties, prod's zeros), first and second order against central differences,
// 16-bit inputs against float32, and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

Tensor ids(const std::vector<int64_t>& v, const Shape& shape, Device d) {
  return from_vector(v, shape, TensorOptions().dtype(DType::kInt64).device(d));
}

struct Case {
  const char* reduce;
  bool include_self;
  std::vector<double> want;
};

TEST_CASE("scatter_reduce combines src into self for every reduce, with and without self",
          "[ops][index][scatter_reduce]") {
  const Device d = test_device();
  // Row 0: position 0 gets 2 and 3, position 1 gets 4; row 1: position 2 gets 1, -2 and 10.
  // The other five positions are not reached and keep self's value whatever the reduce.
  const Tensor self = input({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, d, false);
  const Tensor src = input({2, 3, 4, 1, -2, 10}, {2, 3}, d, false);
  const Tensor index = ids({0, 0, 1, 2, 2, 2}, {2, 3}, d);
  const std::vector<Case> cases = {
      {"sum", true, {6, 6, 3, 4, 5, 6, 16, 8}},
      {"sum", false, {5, 4, 3, 4, 5, 6, 9, 8}},
      {"prod", true, {6, 8, 3, 4, 5, 6, -140, 8}},
      {"prod", false, {6, 4, 3, 4, 5, 6, -20, 8}},
      // "mean" counts self where it is included: (1 + 2 + 3) / 3, (7 + 1 - 2 + 10) / 4.
      {"mean", true, {2, 3, 3, 4, 5, 6, 4, 8}},
      {"mean", false, {2.5, 4, 3, 4, 5, 6, 3, 8}},
      {"amax", true, {3, 4, 3, 4, 5, 6, 10, 8}},
      {"amax", false, {3, 4, 3, 4, 5, 6, 10, 8}},
      {"amin", true, {1, 2, 3, 4, 5, 6, -2, 8}},
      {"amin", false, {2, 4, 3, 4, 5, 6, -2, 8}},
  };
  for (const Case& c : cases) {
    INFO(c.reduce << (c.include_self ? "" : " without self"));
    check_values(scatter_reduce(self, 1, index, src, c.reduce, c.include_self), c.want);
  }
  // Along dim 0 with src wider than index (its [1,2] corner only), a negative dim.
  const Tensor wide = input({9, -9, 9, 9}, {2, 2}, d, false);
  check_values(scatter_reduce(self, -2, ids({1, 0}, {1, 2}, d), wide, "amin", false),
               {1, -9, 3, 4, 9, 6, 7, 8});
  // Excluding self where nothing is scattered changes nothing.
  check_values(scatter_reduce(self, 1, ids({}, {2, 0}, d), input({}, {2, 0}, d, false), "prod",
                              false),
               {1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("scatter_reduce's amax and amin keep a NaN and ignore an excluded self",
          "[ops][index][scatter_reduce]") {
  const Device d = test_device();
  const double nan = std::nan("");
  const Tensor self = input({100, -100, 0}, {3}, d, false);
  const Tensor src = input({1, nan, 2, 3}, {4}, d, false);
  const std::vector<double> got =
      values(scatter_reduce(self, 0, ids({0, 1, 1, 2}, {4}, d), src, "amax", false));
  CHECK(got[0] == 1);  // self's 100 takes no part
  CHECK(std::isnan(got[1]));  // the NaN wins over the later 2
  CHECK(got[2] == 3);
  const std::vector<double> low =
      values(scatter_reduce(self, 0, ids({1, 1, 0, 0}, {4}, d), src, "amin", true));
  CHECK(low[0] == 2);
  CHECK(std::isnan(low[1]));  // NaN beats self's -100
  CHECK(low[2] == 0);
}

TEST_CASE("scatter_reduce's amax / amin gradient is shared evenly among ties",
          "[ops][index][scatter_reduce]") {
  const Device d = test_device();
  {
    // Position 0: self 3 and src 3 tie for the max; position 1: src 5 wins.
    const Tensor self = input({3, 0}, {2}, d);
    const Tensor src = input({3, 1, 5}, {3}, d);
    scatter_reduce(self, 0, ids({0, 0, 1}, {3}, d), src, "amax").backward(ones({2}, f64(d)));
    check_values(self.grad(), {0.5, 0});
    check_values(src.grad(), {0.5, 0, 1});
  }
  {
    // Without self, self's 3 takes no part, so src's 3 gets the whole gradient (central
    // differences agree; the reference would halve it) and self's gradient is zero where
    // index reaches.
    const Tensor self = input({3, 0}, {2}, d);
    const Tensor src = input({3, 1, 5}, {3}, d);
    scatter_reduce(self, 0, ids({0, 0, 1}, {3}, d), src, "amax", false)
        .backward(ones({2}, f64(d)));
    check_values(self.grad(), {0, 0});
    check_values(src.grad(), {1, 0, 1});
  }
  {
    // A three-way tie for the min; position 1 is not reached and passes its gradient.
    const Tensor self = input({1, 4}, {2}, d);
    const Tensor src = input({1, 1, 2}, {3}, d);
    scatter_reduce(self, 0, ids({0, 0, 0}, {3}, d), src, "amin").backward(ones({2}, f64(d)));
    check_values(self.grad(), {1.0 / 3, 1});
    check_values(src.grad(), {1.0 / 3, 1.0 / 3, 0});
  }
}

TEST_CASE("scatter_reduce's sum and mean gradients", "[ops][index][scatter_reduce]") {
  const Device d = test_device();
  const Tensor g = input({1, 2}, {2}, d, false);
  for (bool with_self : {true, false}) {
    INFO("include_self " << with_self);
    const Tensor self = input({1, 2}, {2}, d);
    const Tensor src = input({3, 5}, {2}, d);
    scatter_reduce(self, 0, ids({0, 0}, {2}, d), src, "sum", with_self).backward(g);
    check_values(self.grad(), {with_self ? 1.0 : 0.0, 2});
    check_values(src.grad(), {1, 1});
    const Tensor self2 = input({1, 2}, {2}, d);
    const Tensor src2 = input({3, 5}, {2}, d);
    scatter_reduce(self2, 0, ids({0, 0}, {2}, d), src2, "mean", with_self).backward(g);
    const double n = with_self ? 3 : 2;
    check_values(self2.grad(), {with_self ? 1 / n : 0.0, 2});
    check_values(src2.grad(), {1 / n, 1 / n});
  }
}

TEST_CASE("scatter_reduce's prod gradient with zeros, as the reference",
          "[ops][index][scatter_reduce]") {
  const Device d = test_device();
  const Tensor g = ones({2}, f64(d));
  {
    // self's zero: its gradient is the product of the others, src's is 0 (self is 0).
    const Tensor self = input({0, 2}, {2}, d);
    const Tensor src = input({3, 4}, {2}, d);
    scatter_reduce(self, 0, ids({0, 0}, {2}, d), src, "prod").backward(g);
    check_values(self.grad(), {12, 1});
    check_values(src.grad(), {0, 0});
  }
  {
    // One zero of src at position 0: it gets 2 * 3, the others 0.
    const Tensor self = input({2, 5}, {2}, d);
    const Tensor src = input({0, 3, 4}, {3}, d);
    scatter_reduce(self, 0, ids({0, 0, 1}, {3}, d), src, "prod").backward(g);
    check_values(self.grad(), {0, 4});
    check_values(src.grad(), {6, 0, 5});
  }
  {
    // Two zeros at one position: every gradient there is 0.
    const Tensor self = input({2, 5}, {2}, d);
    const Tensor src = input({0, 0, 3}, {3}, d);
    scatter_reduce(self, 0, ids({0, 0, 0}, {3}, d), src, "prod").backward(g);
    check_values(self.grad(), {0, 1});
    check_values(src.grad(), {0, 0, 0});
  }
  // Against central differences (a product is smooth through its zeros), to second order
  // where at most one zero meets each position.
  const bool with_self = GENERATE(true, false);
  const Fn f = [&](const TensorList& t) {
    return scatter_reduce(t[0], 0, ids({0, 0, 1, 2}, {4}, d), t[1], "prod", with_self);
  };
  const TensorList in = {input({0, 1.5, -2}, {3}, d), input({0.5, 0, 2, 0}, {4}, d)};
  check_gradients(f, in);
  check_second_order(f, in);
}

TEST_CASE("scatter_reduce's prod refuses to differentiate src's gradient where zeros meet",
          "[ops][index][scatter_reduce]") {
  const Device d = test_device();
  const Tensor self = input({2}, {1}, d);
  const Tensor src = input({0, 0, 3}, {3}, d);
  const Tensor out = scatter_reduce(self, 0, ids({0, 0, 0}, {3}, d), src, "prod");
  const TensorList g = grad({out}, {self, src}, {ones({1}, f64(d))}, true, true);
  check_values(g[1], {0, 0, 0});
  // self's gradient (3 * 0 * 0) is still differentiable...
  const TensorList gg = grad({sum(g[0])}, {src}, {}, true, false, /*allow_unused=*/true);
  check_values(gg[0], {0, 0, 0});
  // ...src's is not, as in the reference.
  expect_error<Error>([&] { grad({sum(g[1])}, {src}, {}, false, false); },
                      {"scatter_reduce", "prod", "more than one zero"});
}

TEST_CASE("scatter_reduce's gradients match central differences, first and second order",
          "[ops][index][scatter_reduce]") {
  const Device d = test_device();
  const std::string reduce = GENERATE(as<std::string>(), "sum", "prod", "mean", "amax", "amin");
  const bool with_self = GENERATE(true, false);
  INFO(reduce << " include_self " << with_self);
  // dim 2 of [2,2,4] from a [2,2,3] index with duplicates; gapped values: no ties, no zeros.
  const Tensor index = ids({0, 3, 0, 1, 1, 1, 2, 2, 0, 3, 3, 3}, {2, 2, 3}, d);
  const Fn f = [&](const TensorList& t) {
    return scatter_reduce(t[0], 2, index, t[1], reduce, with_self);
  };
  const TensorList in = {random_input({2, 2, 4}, d, 1, -2, 2, 0.1),
                         random_input({2, 2, 3}, d, 2, -2, 2, 0.1)};
  check_gradients(f, in);
  check_second_order(f, in);
}

TEST_CASE("scatter_reduce in float16 and bfloat16 agrees with float32",
          "[ops][index][scatter_reduce]") {
  const Device d = test_device();
  const DType low = GENERATE(DType::kFloat16, DType::kBFloat16);
  const std::string reduce = GENERATE(as<std::string>(), "sum", "prod", "mean", "amax", "amin");
  const Tensor self = from_vector<double>({0.5, 1.25, -2, 3}, {4}, f64(d));
  const Tensor src = from_vector<double>({1.5, -0.75, 2, 0.25, 1}, {5}, f64(d));
  const Tensor index = ids({0, 0, 2, 3, 2}, {5}, d);
  const Tensor got = scatter_reduce(to(self, low), 0, index, to(src, low), reduce);
  CHECK(got.dtype() == low);
  const Tensor want =
      to(scatter_reduce(to(self, DType::kFloat32), 0, index, to(src, DType::kFloat32), reduce),
         low);
  CHECK(to(got, DType::kFloat64).to_vector<double>() ==
        to(want, DType::kFloat64).to_vector<double>());
}

TEST_CASE("scatter_reduce refuses bad input, naming itself",
          "[ops][index][scatter_reduce][errors]") {
  const Device d = test_device();
  const Tensor self = input({0, 0, 0}, {3}, d, false);
  const Tensor src = input({1, 2}, {2}, d, false);
  // On sim the task refuses before writing, and the error surfaces at the read.
  for (bool with_self : {true, false}) {
    expect_error<ValueError>(
        [&] { values(scatter_reduce(self, 0, ids({0, 3}, {2}, d), src, "amax", with_self)); },
        {"scatter_reduce: index 3", "out of range", "0..2"});
  }
  expect_error<ValueError>([&] { scatter_reduce(self, 0, ids({0, 1}, {2}, d), src, "max"); },
                           {"scatter_reduce", "\"max\"", "\"sum\"", "\"prod\"", "\"mean\"",
                            "\"amax\"", "\"amin\""});
  expect_error<ValueError>(
      [&] { scatter_reduce(self, 0, ids({0, 1}, {2}, d), input({1}, {1}, d, false), "sum"); },
      {"scatter_reduce: src", "index"});
  expect_error<ValueError>(
      [&] { scatter_reduce(self, 0, ids({0, 1}, {1, 2}, d), src, "sum"); },
      {"scatter_reduce", "rank"});
  expect_error<ValueError>(
      [&] { scatter_reduce(self, 1, ids({0, 1}, {2}, d), src, "sum"); }, {"scatter_reduce", "1"});
  const Tensor ints = zeros({3}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>(
      [&] { scatter_reduce(ints, 0, ids({0}, {1}, d), ints, "sum"); }, {"scatter_reduce", "int64"});
  const Tensor f32 = zeros({2}, TensorOptions().device(d));
  expect_error<ValueError>([&] { scatter_reduce(self, 0, ids({0, 1}, {2}, d), f32, "sum"); },
                           {"scatter_reduce", "float32", "float64"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

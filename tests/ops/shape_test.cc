// Views and reshapes: transpose, permute, reshape, view, expand, squeeze, unsqueeze, slice,
// narrow. Values, view semantics (shared storage), gradients (first and second order),
// errors.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("view ops forward values and sharing", "[ops][shape]") {
  const Device d = test_device();
  // [[0, 1, 2], [3, 4, 5]]
  const Tensor a = input({0, 1, 2, 3, 4, 5}, {2, 3}, d, false);

  const Tensor t = transpose(a, 0, 1);
  CHECK(t.sizes() == Shape{3, 2});
  CHECK(t.data_ptr() == a.data_ptr());
  check_values(t, {0, 3, 1, 4, 2, 5});
  check_values(transpose(a, -1, -2), {0, 3, 1, 4, 2, 5});

  const Tensor c = input({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2}, d, false);
  const Tensor p = permute(c, {2, 0, 1});
  CHECK(p.sizes() == Shape{2, 2, 3});
  check_values(p, {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
  check_values(reshape(p, {4, 3}), {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
  check_values(view(a, {3, -1}), {0, 1, 2, 3, 4, 5});
  CHECK(view(a, {3, -1}).sizes() == Shape{3, 2});
  check_values(expand(input({1, 2}, {2, 1}, d, false), {2, 3}), {1, 1, 1, 2, 2, 2});

  const Tensor u = unsqueeze(a, 1);
  CHECK(u.sizes() == Shape{2, 1, 3});
  CHECK(unsqueeze(a, -1).sizes() == Shape{2, 3, 1});
  CHECK(unsqueeze(a, 0).sizes() == Shape{1, 2, 3});
  CHECK(squeeze(u).sizes() == Shape{2, 3});
  CHECK(squeeze(u, 1).sizes() == Shape{2, 3});
  CHECK(squeeze(u, 0).sizes() == Shape{2, 1, 3});  // not size 1: unchanged
  CHECK(squeeze(zeros({1, 1}, f64(d))).dim() == 0);
  check_values(squeeze(unsqueeze(t, 1), -2), {0, 3, 1, 4, 2, 5});

  check_values(slice(a, 1, 0, 3, 2), {0, 2, 3, 5});
  check_values(slice(a, 1, -2, 100), {1, 2, 4, 5});
  check_values(slice(a, 1, -100, -1), {0, 1, 3, 4});
  CHECK(slice(a, 1, 2, 1).sizes() == Shape{2, 0});
  CHECK(slice(a, 0, 5, 9).sizes() == Shape{0, 3});
  check_values(slice(slice(a, 1, 1, 3), 0, 1, 2), {4, 5});
  check_values(narrow(a, 1, 1, 2), {1, 2, 4, 5});
  check_values(narrow(a, 0, -1, 1), {3, 4, 5});
  CHECK(narrow(a, 1, 3, 0).sizes() == Shape{2, 0});
  // Views share storage with their base: a write through the base is visible.
  Tensor base = input({0, 1, 2, 3, 4, 5}, {2, 3}, d, false);
  const Tensor sl = narrow(base, 1, 1, 1);
  fill_(base, 7);
  check_values(sl, {7, 7});
}

TEST_CASE("view ops gradients", "[ops][shape][grad]") {
  const Device d = test_device();
  const Tensor a = random_input({2, 3, 4}, d, 41);
  const Tensor m = random_input({3, 4}, d, 42);

  SECTION("transpose and permute") {
    check_gradients([](const TensorList& x) { return transpose(x[0], 0, 2); }, {a});
    check_gradients([](const TensorList& x) { return permute(x[0], {1, 2, 0}); }, {a});
    check_gradients([](const TensorList& x) { return permute(x[0], {-1, 0, 1}); }, {a});
    check_second_order([](const TensorList& x) { return mul(transpose(x[0], 0, 1), x[0]); },
                       {random_input({3, 3}, d, 43)});
    check_second_order(
        [](const TensorList& x) {
          return mul(permute(x[0], {1, 0}), permute(x[0], {1, 0}));
        },
        {m});
  }
  SECTION("reshape, view, expand") {
    check_gradients([](const TensorList& x) { return reshape(x[0], {4, -1}); }, {a});
    check_gradients([](const TensorList& x) { return reshape(transpose(x[0], 0, 1), {12}); },
                    {m});  // non-contiguous: a copy
    check_gradients([](const TensorList& x) { return view(x[0], {6, 4}); }, {a});
    check_gradients(
        [](const TensorList& x) {
          return expand(x[0], {2, 3, 4});
        },
        {random_input({3, 1}, d, 44)});
    check_second_order(
        [](const TensorList& x) { return mul(reshape(x[0], {12}), reshape(x[0], {12})); }, {m});
    check_second_order(
        [](const TensorList& x) {
          return mul(expand(x[0], {3, 4}), expand(x[0], {3, 4}));
        },
        {random_input({4}, d, 45)});
  }
  SECTION("squeeze and unsqueeze") {
    const Tensor s = random_input({3, 1, 2, 1}, d, 46);
    check_gradients([](const TensorList& x) { return squeeze(x[0]); }, {s});
    check_gradients([](const TensorList& x) { return squeeze(x[0], -1); }, {s});
    check_gradients([](const TensorList& x) { return squeeze(x[0], 0); }, {s});
    check_gradients([](const TensorList& x) { return unsqueeze(x[0], 1); }, {m});
    check_gradients([](const TensorList& x) { return unsqueeze(transpose(x[0], 0, 1), 2); }, {m});
    check_second_order([](const TensorList& x) { return mul(squeeze(x[0]), squeeze(x[0])); }, {s});
    check_second_order(
        [](const TensorList& x) { return mul(unsqueeze(x[0], 0), unsqueeze(x[0], 0)); }, {m});
  }
  SECTION("slice and narrow") {
    check_gradients([](const TensorList& x) { return slice(x[0], 2, 1, 4, 2); }, {a});
    check_gradients([](const TensorList& x) { return slice(x[0], -1, -3, -1); }, {a});
    check_gradients([](const TensorList& x) { return slice(transpose(x[0], 0, 1), 0, 1, 3); }, {m});
    check_gradients([](const TensorList& x) { return narrow(x[0], 1, 1, 2); }, {a});
    check_gradients([](const TensorList& x) { return narrow(narrow(x[0], 0, 1, 2), 1, 0, 3); },
                    {m});
    check_second_order(
        [](const TensorList& x) { return mul(slice(x[0], 1, 0, 4, 3), slice(x[0], 1, 1, 4, 3)); },
        {m});
    check_second_order(
        [](const TensorList& x) { return mul(narrow(x[0], 0, 0, 2), narrow(x[0], 0, 1, 2)); }, {m});
  }
  SECTION("third order through slice: the backward of the backward slices again") {
    // f = x1^4 + x3^4; g1 = 4 x^3 at 1 and 3; sum(g1 * x) = 4 x^4, whose gradient (through
    // the backward's backward, with x flowing into it) is 16 x^3, then 48 x^2.
    Tensor x = input({1, 2, 3, 4}, {4}, d);
    Tensor g1 = grad({sum(pow(slice(x, 0, 1, 4, 2), 4))}, {x}, {}, true, true)[0];
    Tensor g2 = grad({sum(mul(g1, x))}, {x}, {}, true, true)[0];
    check_values(g2, {0, 128, 0, 1024});
    Tensor g3 = grad({sum(g2)}, {x})[0];
    check_values(g3, {0, 192, 0, 768});
  }
}

TEST_CASE("view ops errors", "[ops][shape][errors]") {
  const Tensor a = zeros({2, 3});
  expect_error<ValueError>([&] { transpose(a, 0, 2); }, {"transpose", "dimension 2", "rank 2"});
  expect_error<ValueError>([&] { permute(a, {0}); }, {"permute", "[0]"});
  expect_error<ValueError>([&] { permute(a, {1, 1}); }, {"permute", "twice"});
  expect_error<ValueError>([&] { permute(a, {0, 5}); }, {"permute", "out of range"});
  expect_error<ValueError>([&] { squeeze(a, 3); }, {"squeeze", "out of range"});
  expect_error<ValueError>([&] { unsqueeze(a, 3); }, {"unsqueeze", "dimension 3"});
  expect_error<ValueError>([&] { unsqueeze(a, -4); }, {"unsqueeze", "out of range"});
  expect_error<ValueError>([&] { slice(a, 1, 0, 2, 0); }, {"slice", "step"});
  expect_error<ValueError>([&] { slice(a, 2, 0, 1); }, {"slice", "out of range"});
  expect_error<ValueError>([&] { slice(scalar_tensor(1), 0, 0, 1); }, {"slice", "0-dim"});
  expect_error<ValueError>([&] { narrow(a, 1, 2, 2); }, {"narrow", "exceeds", "size 3"});
  expect_error<ValueError>([&] { narrow(a, 1, -4, 1); }, {"narrow", "out of range"});
  expect_error<ValueError>([&] { narrow(a, 0, 0, -1); }, {"narrow"});
  expect_error<ValueError>([&] { view(transpose(a, 0, 1), {6}); }, {"view", "contiguous"});
  expect_error<ValueError>([&] { reshape(a, {4, 2}); }, {"reshape", "[4, 2]", "6"});
  expect_error<ValueError>([&] { expand(a, {2, 4}); }, {"expand", "[2, 4]"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

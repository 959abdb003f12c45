// pad (ops/pad.cc), as torch.nn.functional.pad: constant, reflect, replicate and circular modes
// with values written out by hand, pairs from the last dim backwards, negative amounts
// that crop, int64 and bool inputs in constant mode; gradients (copies summed back to
// their source) by hand and against central differences, first and second order; the
// reference's errors. Behaviours follow the reference's padding tests, ported.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("pad fills, mirrors or repeats trailing dims", "[ops][pad]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  const Tensor c = pad(x, {1, 2});
  CHECK(c.sizes() == Shape{2, 6});
  check_values(c, {0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0});
  // Pairs from the last dim backwards; a negative amount crops.
  check_values(pad(x, {1, 0, -1, 1}, "constant", 9), {9, 4, 5, 6, 9, 9, 9, 9});
  const Tensor r = input({1, 2, 3, 4}, {1, 4}, d);
  check_values(pad(r, {2, 1}, "reflect"), {3, 2, 1, 2, 3, 4, 3});
  check_values(pad(r, {2, 1}, "replicate"), {1, 1, 1, 2, 3, 4, 4});
  check_values(pad(r, {-1, 1}, "reflect"), {2, 3, 4, 3});
  check_values(pad(r, {1, -2}, "replicate"), {1, 1, 2});
  // Two dims of a [1, 2, 3] input.
  const Tensor m = input({1, 2, 3, 4, 5, 6}, {1, 2, 3}, d);
  const Tensor mr = pad(m, {1, 1, 1, 1}, "reflect");
  CHECK(mr.sizes() == Shape{1, 4, 5});
  check_values(mr, {5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2});
  check_values(pad(m, {0, 1, 1, 0}, "replicate"), {1, 2, 3, 3, 1, 2, 3, 3, 4, 5, 6, 6});
  // Non-contiguous input; no padding is a copy.
  check_values(pad(transpose(x, 0, 1), {1, 0}), {0, 1, 4, 0, 2, 5, 0, 3, 6});
  const Tensor same = pad(x, {0, 0});
  CHECK_FALSE(same.is_same(x));
  check_values(same, values(x));
  // Constant mode takes any dtype.
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(d);
  CHECK(pad(from_vector<int64_t>({7, 8}, {2}, i64), {1, 1}, "constant", -1).to_vector<int64_t>() ==
        std::vector<int64_t>{-1, 7, 8, -1});
  const Tensor b = from_vector<bool>({true}, {1}, TensorOptions().dtype(DType::kBool).device(d));
  CHECK(pad(b, {1, 0}).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(pad(to(r, DType::kBFloat16), {1, 1}, "reflect").dtype() == DType::kBFloat16);
}

TEST_CASE("the gradient of pad sums each copy back to its source", "[ops][pad]") {
  const Device d = test_device();
  const Tensor r = input({1, 2, 3, 4}, {1, 4}, d);
  // Output positions read 2, 1, 0, 1, 2, 3, 2.
  pad(r, {2, 1}, "reflect").backward(ones({1, 7}, f64(d)));
  check_values(r.grad(), {1, 2, 3, 1});
  const Tensor q = input({1, 2, 3}, {1, 3}, d);
  pad(q, {2, -1}, "replicate").backward(input({1, 2, 3, 4}, {1, 4}, d, false));
  check_values(q.grad(), {6, 4, 0});
  const Tensor k = input({1, 2, 3}, {3}, d);
  pad(k, {1, -1}, "constant", 5).backward(input({1, 2, 3}, {3}, d, false));
  check_values(k.grad(), {2, 3, 0});
  for (const char* mode : {"constant", "reflect", "replicate"}) {
    INFO(mode);
    check_gradients([mode](const TensorList& t) { return pad(t[0], {2, 1, -1, 2}, mode); },
                    {random_input({1, 3, 3}, d, 1)});
    check_second_order(
        [mode](const TensorList& t) {
          const Tensor y = pad(t[0], {1, 2}, mode);
          return mul(y, y);
        },
        {random_input({2, 3}, d, 2)});
  }
}

TEST_CASE("pad rejects what the reference rejects", "[ops][pad]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6}, {1, 2, 3}, d);
  expect_error<ValueError>([&] { pad(x, {1, 2, 3}); }, {"pad", "{1, 2, 3}", "even"});
  expect_error<ValueError>([&] { pad(x, {1, 1, 1, 1, 1, 1, 1, 1}); }, {"pad", "4 dims", "3"});
  expect_error<ValueError>([&] { pad(x, {1, 1}, "wrap"); }, {"pad", "\"wrap\"", "circular"});
  expect_error<ValueError>([&] { pad(x, {1, 1}, "reflect", 2.0); }, {"pad", "value", "reflect"});
  expect_error<ValueError>([&] { pad(x, {3, 0}, "reflect"); },
                           {"pad", "reflect", "(3, 0)", "size 3"});
  expect_error<ValueError>([&] { pad(x, {1, 1, 1, 1, 1, 1}, "replicate"); },
                           {"pad", "replicate", "last 1, 2 or 3 dims"});
  expect_error<ValueError>([&] { pad(x, {-2, -2}); }, {"pad", "negative size -1"});
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(d);
  expect_error<ValueError>([&] { pad(zeros({2}, i64), {1, 1}, "constant", 2.5); },
                           {"pad", "2.5", "int64"});
  expect_error<ValueError>([&] { pad(zeros({2}, i64), {1, 1}, "constant", 1e300); },
                           {"pad", "int64"});
}

TEST_CASE("circular pad wraps around, and crops with negative amounts", "[ops][pad]") {
  const Device d = test_device();
  const Tensor r = input({1, 2, 3, 4}, {1, 4}, d);
  check_values(pad(r, {2, 1}, "circular"), {3, 4, 1, 2, 3, 4, 1});
  // Amounts up to the size wrap once.
  check_values(pad(r, {4, 4}, "circular"), {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
  // Two dims of a [1, 2, 3]: the last wraps 2 on the left, the middle 1 on each side.
  const Tensor m = input({0, 1, 2, 3, 4, 5}, {1, 2, 3}, d);
  const Tensor mc = pad(m, {2, 0, 1, 1}, "circular");
  CHECK(mc.sizes() == Shape{1, 4, 5});
  check_values(mc, {4, 5, 3, 4, 5, 1, 2, 0, 1, 2, 4, 5, 3, 4, 5, 1, 2, 0, 1, 2});
  // A negative amount crops first; the other side wraps within what is left.
  check_values(pad(r, {-1, 2}, "circular"), {2, 3, 4, 2, 3});
  check_values(pad(r, {1, -2}, "circular"), {2, 1, 2});
  check_values(pad(r, {-1, -1}, "circular"), {2, 3});
  // Three dims of a [1, 2, 2, 2]; any dtype (only copies).
  const Tensor c = input({0, 1, 2, 3, 4, 5, 6, 7}, {1, 2, 2, 2}, d);
  check_values(pad(c, {0, 1, 0, 0, 1, 0}, "circular"),
               {4, 5, 4, 6, 7, 6, 0, 1, 0, 2, 3, 2, 4, 5, 4, 6, 7, 6});
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(d);
  CHECK(pad(from_vector<int64_t>({7, 8, 9}, {1, 3}, i64), {1, 2}, "circular")
            .to_vector<int64_t>() == std::vector<int64_t>{9, 7, 8, 9, 7, 8});
  // Gradients: each copy adds back to its source.
  pad(r, {2, 3}, "circular").backward(input({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 9}, d, false));
  // Output positions read 2, 3, 0, 1, 2, 3, 0, 1, 2.
  check_values(r.grad(), {3 + 7, 4 + 8, 1 + 5 + 9, 2 + 6});
  check_gradients([](const TensorList& t) { return pad(t[0], {2, -1, 1, 2}, "circular"); },
                  {random_input({1, 3, 3}, d, 5)});
  check_second_order(
      [](const TensorList& t) {
        const Tensor y = pad(t[0], {3, 1}, "circular");
        return mul(y, y);
      },
      {random_input({2, 3}, d, 6)});
  // Wrapping more than once is refused, as in the reference.
  expect_error<ValueError>([&] { pad(r, {5, 0}, "circular"); },
                           {"pad", "circular", "(5, 0)", "more than once", "at most 4"});
  expect_error<ValueError>([&] { pad(r, {-2, 3}, "circular"); },
                           {"pad", "(-2, 3)", "at most 2", "left after cropping"});
  expect_error<ValueError>([&] { pad(r, {-3, -2}, "circular"); }, {"pad", "negative size -1"});
  expect_error<ValueError>([&] { pad(input({1, 2}, {2}, d), {1, 1}, "circular"); },
                           {"pad", "circular", "last 1, 2 or 3 dims"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

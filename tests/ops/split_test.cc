// split, chunk and repeat: the reference's sizes rule (last piece smaller, chunk giving
// fewer pieces, empty dims), views sharing storage, gradients (by hand and against
// central differences, first and second order), methods and errors. Behaviours follow
// PyTorch's split / chunk / repeat (test_torch.py, test_view_ops.py), ported.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

std::vector<Shape> shapes_of(const std::vector<Tensor>& ts) {
  std::vector<Shape> out;
  for (const Tensor& t : ts) out.push_back(t.sizes());
  return out;
}

TEST_CASE("split and chunk follow the reference's sizes rule and return views",
          "[ops][split]") {
  const Device d = test_device();
  const Tensor x = input({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 5}, d);
  const std::vector<Tensor> s = split(x, 2, 1);
  CHECK(shapes_of(s) == std::vector<Shape>{{2, 2}, {2, 2}, {2, 1}});
  check_values(contiguous(s[1]), {2, 3, 7, 8});
  check_values(contiguous(s[2]), {4, 9});
  CHECK(s[1].storage_offset() == x.storage_offset() + 2);  // a view
  CHECK(shapes_of(split(x, 5, 1)) == std::vector<Shape>{{2, 5}});
  CHECK(shapes_of(split(x, 7, -1)) == std::vector<Shape>{{2, 5}});
  CHECK(shapes_of(split(x, std::vector<int64_t>{1, 0, 4}, 1)) ==
        std::vector<Shape>{{2, 1}, {2, 0}, {2, 4}});
  check_values(contiguous(split(x, {1, 4}, 1)[1]), {1, 2, 3, 4, 6, 7, 8, 9});
  CHECK(shapes_of(split(x, 1)) == std::vector<Shape>{{1, 5}, {1, 5}});  // dim 0 by default
  // chunk: pieces of ceil(5 / k).
  CHECK(shapes_of(chunk(x, 2, 1)) == std::vector<Shape>{{2, 3}, {2, 2}});
  CHECK(shapes_of(chunk(x, 3, 1)) == std::vector<Shape>{{2, 2}, {2, 2}, {2, 1}});
  CHECK(shapes_of(chunk(x, 4, 1)) == std::vector<Shape>{{2, 2}, {2, 2}, {2, 1}});  // fewer
  CHECK(shapes_of(chunk(x, 9, 1)).size() == 5);
  const Tensor six = input({0, 1, 2, 3, 4, 5}, {6}, d);
  CHECK(shapes_of(chunk(six, 4)) == std::vector<Shape>{{2}, {2}, {2}});
  check_values(contiguous(chunk(six, 4)[2]), {4, 5});
  // Empty dims.
  const Tensor e = input({}, {0, 3}, d);
  CHECK(shapes_of(split(e, 2)) == std::vector<Shape>{{0, 3}});
  CHECK(shapes_of(split(e, 0)) == std::vector<Shape>{{0, 3}});
  CHECK(shapes_of(chunk(e, 3)) == std::vector<Shape>{{0, 3}, {0, 3}, {0, 3}});
  // Methods.
  CHECK(shapes_of(x.split(2, 1)) == shapes_of(split(x, 2, 1)));
  CHECK(shapes_of(x.split({3, 2}, 1)) == std::vector<Shape>{{2, 3}, {2, 2}});
  CHECK(shapes_of(x.chunk(2, 1)) == shapes_of(chunk(x, 2, 1)));
}

TEST_CASE("the gradients of split and chunk land in each piece's slice", "[ops][split]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5}, {5}, d);
  const std::vector<Tensor> p = split(x, 2);
  add(sum(mul(p[0], 2.0)), sum(mul(p[2], 3.0))).backward();
  check_values(x.grad(), {2, 2, 0, 0, 3});
  check_gradients(
      [](const TensorList& t) {
        const std::vector<Tensor> c = chunk(t[0], 3, 1);
        return cat({mul(c[2], c[0]), exp(c[1])}, 1);
      },
      {random_input({2, 6}, d, 1)});
  check_gradients(
      [](const TensorList& t) {
        const std::vector<Tensor> c = split(t[0], {2, 1}, 0);
        return add(sum(c[0], {0}), mul(c[1], 4.0));
      },
      {random_input({3, 2}, d, 2)});
  check_second_order(
      [](const TensorList& t) {
        const std::vector<Tensor> c = split(t[0], 2, 0);
        return mul(c[0], c[1]);
      },
      {random_input({4}, d, 3)});
}

TEST_CASE("repeat tiles along every dim and adds leading dims", "[ops][split]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3}, {3}, d);
  check_values(repeat(x, {2}), {1, 2, 3, 1, 2, 3});
  const Tensor r = repeat(x, {2, 2});
  CHECK(r.sizes() == Shape{2, 6});
  check_values(r, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  const Tensor m = input({1, 2, 3, 4}, {2, 2}, d);
  check_values(repeat(m, {2, 1}), {1, 2, 3, 4, 1, 2, 3, 4});
  check_values(repeat(m, {1, 2}), {1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(repeat(m, {3, 1, 1}).sizes() == Shape{3, 2, 2});
  CHECK(repeat(m, {0, 2}).sizes() == Shape{0, 4});
  CHECK(repeat(input({5}, {}, d), {2, 2}).sizes() == Shape{2, 2});
  check_values(m.repeat({1, 2}), values(repeat(m, {1, 2})));
  // Each element's gradient sums its copies.
  sum(mul(repeat(x, {2, 2}), arange(12, f64(d)).reshape({2, 6}))).backward();
  check_values(x.grad(), {0 + 3 + 6 + 9, 1 + 4 + 7 + 10, 2 + 5 + 8 + 11});
  check_gradients([](const TensorList& t) { return repeat(t[0], {2, 1, 3}); },
                  {random_input({2, 2}, d, 4)});
  check_second_order([](const TensorList& t) { return mul(repeat(t[0], {2}), repeat(t[0], {2})); },
                     {random_input({3}, d, 5)});
}

TEST_CASE("split, chunk and repeat reject bad sizes and dims", "[ops][split]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  expect_error<ValueError>([&] { split(x, std::vector<int64_t>{1, 1}, 1); },
                           {"split", "[1, 1]", "sum to 2", "size 3"});
  expect_error<ValueError>([&] { split(x, std::vector<int64_t>{4, -1}, 1); },
                           {"split", "negative"});
  expect_error<ValueError>([&] { split(x, 0, 1); }, {"split", "split_size 0", "positive"});
  expect_error<ValueError>([&] { split(x, -2, 1); }, {"split", "-2"});
  expect_error<ValueError>([&] { split(x, 1, 2); }, {"split", "2"});
  expect_error<ValueError>([&] { chunk(x, 0, 1); }, {"chunk", "positive", "0"});
  expect_error<ValueError>([&] { chunk(x, 2, -3); }, {"chunk", "-3"});
  expect_error<ValueError>([&] { chunk(input({1}, {}, d), 1); }, {"chunk", "at least 1"});
  expect_error<ValueError>([&] { repeat(x, {2}); }, {"repeat", "at least one per dimension"});
  expect_error<ValueError>([&] { repeat(x, {1, -1}); }, {"repeat", "negative"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

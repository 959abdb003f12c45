// tril and triu: values against hand-written triangles (every diagonal offset, batches,
// int64 and bool inputs, NaN outside the triangle), the gradient masked alike (by hand
// and against central differences, first and second order), method forms and errors.
// Behaviours follow PyTorch's tril/triu (test_torch.py, OpInfo samples), ported.
#include <cmath>
#include <limits>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("tril and triu keep a triangle of the last two dims, shifted by diagonal",
          "[ops][triangular]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}, d);
  check_values(tril(x), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  check_values(tril(x, 1), {1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
  check_values(tril(x, -1), {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  check_values(tril(x, 5), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  check_values(tril(x, -3), std::vector<double>(12, 0.0));
  check_values(triu(x), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  check_values(triu(x, 1), {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12});
  check_values(triu(x, -1), {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  // Methods.
  check_values(x.tril(-1), values(tril(x, -1)));
  check_values(x.triu(2), values(triu(x, 2)));
  // tril(x, k) + triu(x, k + 1) == x.
  check_values(add(tril(x, 1), triu(x, 2)), values(x));
}

TEST_CASE("tril and triu apply the same mask to every leading index and to other dtypes",
          "[ops][triangular]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}, d);
  check_values(tril(x), {1, 0, 3, 4, 5, 0, 7, 8});
  check_values(triu(x), {1, 2, 0, 4, 5, 6, 0, 8});
  // A transposed (non-contiguous) input: tril of x^T is triu of x, transposed.
  const Tensor m = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  check_values(contiguous(tril(transpose(m, 0, 1))), values(contiguous(transpose(triu(m), 0, 1))));
  const Tensor i = from_vector<int64_t>({1, 2, 3, 4}, {2, 2},
                                        TensorOptions().dtype(DType::kInt64).device(d));
  CHECK(tril(i).dtype() == DType::kInt64);
  CHECK(tril(i).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 3, 4});
  const Tensor b = from_vector<bool>({true, true, true, true}, {2, 2},
                                     TensorOptions().dtype(DType::kBool).device(d));
  CHECK(triu(b).to_vector<bool>() == std::vector<bool>{true, true, false, true});
  // Outside the triangle every value becomes 0, NaN included (as the reference).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> got = values(tril(input({1, nan, nan, 4}, {2, 2}, d)));
  CHECK(got[1] == 0);
  CHECK(std::isnan(got[2]));
  // An empty matrix stays empty.
  CHECK(tril(input({}, {0, 3}, d)).sizes() == Shape{0, 3});
}

TEST_CASE("the gradient of tril and triu is the incoming gradient under the same mask",
          "[ops][triangular]") {
  const Device d = test_device();
  const Tensor x = random_input({3, 3}, d, 7);
  sum(tril(x, -1)).backward();
  check_values(x.grad(), {0, 0, 0, 1, 0, 0, 1, 1, 0});
  const Tensor y = random_input({2, 3}, d, 8);
  sum(triu(y, 1)).backward();
  check_values(y.grad(), {0, 1, 1, 0, 0, 1});
  for (int64_t k : {-1, 0, 2}) {
    check_gradients([k](const TensorList& t) { return tril(t[0], k); },
                    {random_input({2, 3, 4}, d, 9)});
    check_gradients([k](const TensorList& t) { return triu(t[0], k); },
                    {random_input({3, 4}, d, 10)});
  }
  check_second_order([](const TensorList& t) { return mul(tril(t[0]), t[0]); },
                     {random_input({3, 3}, d, 11)});
  check_second_order([](const TensorList& t) { return mul(triu(t[0], -1), t[0]); },
                     {random_input({2, 3}, d, 12)});
}

TEST_CASE("tril and triu need at least two dims", "[ops][triangular]") {
  const Device d = test_device();
  expect_error<ValueError>([&] { tril(input({1, 2, 3}, {3}, d)); },
                           {"tril", "[3]", "at least 2 dimensions"});
  expect_error<ValueError>([&] { triu(input({1}, {}, d)); }, {"triu", "at least 2 dimensions"});
  expect_error<ValueError>([&] { tril(Tensor()); }, {"tril"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

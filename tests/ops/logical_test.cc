// all and any: values over all elements and along a dim (keepdim, negative dims, NaN,
// int64 and bool inputs, empty reductions), bool results without history, methods and
// errors. Behaviours follow PyTorch's all/any (test_reductions.py), ported.
#include <limits>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

std::vector<bool> bits(const Tensor& t) {
  REQUIRE(t.dtype() == DType::kBool);
  return t.to_vector<bool>();
}

TEST_CASE("all and any over all elements and along a dim", "[ops][logical]") {
  const Device d = test_device();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = input({1, nan, -2, 0, 0, 0}, {2, 3}, d);
  CHECK(bits(all(x)) == std::vector<bool>{false});
  CHECK(bits(any(x)) == std::vector<bool>{true});
  CHECK(all(x).dim() == 0);
  CHECK(bits(all(x, 1)) == std::vector<bool>{true, false});  // NaN is nonzero
  CHECK(bits(any(x, 1)) == std::vector<bool>{true, false});
  CHECK(bits(all(x, 0)) == std::vector<bool>{false, false, false});
  CHECK(bits(any(x, -2)) == std::vector<bool>{true, true, true});
  CHECK(all(x, 1, true).sizes() == Shape{2, 1});
  CHECK(bits(x.all()) == bits(all(x)));
  CHECK(bits(x.any(1, true)) == bits(any(x, 1, true)));
  CHECK(bits(x.all(0)) == bits(all(x, 0)));
  CHECK(bits(x.any()) == bits(any(x)));
  CHECK_FALSE(any(x).requires_grad());
  CHECK(any(x).grad_fn() == nullptr);
  const Tensor ones3 = input({1, 2, 3}, {3}, d);
  CHECK(bits(all(ones3)) == std::vector<bool>{true});
  CHECK(bits(any(zeros({2, 2}, TensorOptions().device(d)))) == std::vector<bool>{false});
}

TEST_CASE("all and any take int64 and bool inputs; empty reductions are true / false",
          "[ops][logical]") {
  const Device d = test_device();
  const Tensor i = from_vector<int64_t>({0, 3, 5, 7}, {2, 2},
                                        TensorOptions().dtype(DType::kInt64).device(d));
  CHECK(bits(all(i, 0)) == std::vector<bool>{false, true});
  CHECK(bits(any(i, 1)) == std::vector<bool>{true, true});
  const Tensor b = from_vector<bool>({false, false, true}, {3},
                                     TensorOptions().dtype(DType::kBool).device(d));
  CHECK(bits(all(b)) == std::vector<bool>{false});
  CHECK(bits(any(b)) == std::vector<bool>{true});
  const Tensor e = zeros({0, 2}, TensorOptions().device(d));
  CHECK(bits(all(e)) == std::vector<bool>{true});
  CHECK(bits(any(e)) == std::vector<bool>{false});
  CHECK(bits(all(e, 0)) == std::vector<bool>{true, true});
  CHECK(bits(any(e, 0)) == std::vector<bool>{false, false});
  CHECK(bits(any(input({0.5}, {}, d), 0)) == std::vector<bool>{true});
}

TEST_CASE("all and any reject a dim out of range", "[ops][logical]") {
  const Device d = test_device();
  const Tensor x = input({1, 2}, {2}, d);
  expect_error<Error>([&] { all(x, 1); }, {"all", "1"});
  expect_error<Error>([&] { any(x, -2); }, {"any", "-2"});
  expect_error<Error>([&] { any(Tensor()); }, {"any"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

// scatter (ops/gather.cc) against values worked by hand, as the reference's: src or a value
// written along a dim, src larger than index, the gradients (self's zeroed where written,
// src's gathered), duplicates on the host (the last in row-major order wins), errors.
#include <catch2/catch.hpp>

#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::input;
using testing::test_device;
using testing::values;

Tensor ids(const std::vector<int64_t>& v, const Shape& shape, Device d) {
  return from_vector(v, shape, TensorOptions().dtype(DType::kInt64).device(d));
}

TEST_CASE("scatter writes src or a value at the indexed positions", "[ops][index]") {
  const Device d = test_device();
  const Tensor self = input({9, 9, 9, 9, 9, 9}, {2, 3}, d, false);
  const Tensor src = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  // dim 1: out[i][index[i][j]] = src[i][j] (src [2, 3] wider than index [2, 2]: its
  // corner). Distinct indices: which duplicate wins is the device's choice on cuda.
  CHECK(values(scatter(self, 1, ids({2, 0, 1, 2}, {2, 2}, d), src)) ==
        std::vector<double>{2, 9, 1, 9, 4, 5});
  // dim 0: out[index[i][j]][j] = src[i][j]
  CHECK(values(scatter(self, 0, ids({1, 0, 1}, {1, 3}, d), src)) ==
        std::vector<double>{9, 2, 9, 1, 9, 3});
  CHECK(values(scatter(self, 1, ids({1, 2}, {2, 1}, d), 7.5)) ==
        std::vector<double>{9, 7.5, 9, 9, 9, 7.5});
}

TEST_CASE("scatter's gradients: self's zeroed where written, src's gathered",
          "[ops][index]") {
  const Device d = test_device();
  const Tensor self = input({1, 1, 1, 1, 1, 1}, {2, 3}, d);
  const Tensor src = input({1, 2, 3, 4}, {2, 2}, d);
  const Tensor w = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  sum(mul(scatter(self, 1, ids({2, 0, 1, 1}, {2, 2}, d), src), w)).backward();
  CHECK(values(self.grad()) == std::vector<double>{0, 2, 0, 4, 0, 6});
  // Duplicates both get w's entry, whichever value was kept.
  CHECK(values(src.grad()) == std::vector<double>{3, 1, 5, 5});
}

TEST_CASE("scatter with duplicate indices keeps the last on the host", "[ops][index]") {
  const Device d(GENERATE(as<std::string>(), "cpu", "sim:0"));
  const Tensor self = input({0, 0, 0}, {3}, d, false);
  CHECK(values(scatter(self, 0, ids({1, 1, 1}, {3}, d), input({4, 5, 6}, {3}, d, false))) ==
        std::vector<double>{0, 6, 0});
}

TEST_CASE("scatter refuses bad input", "[ops][index][errors]") {
  const Device d = test_device();
  const Tensor self = input({0, 0, 0}, {3}, d, false);
  // On sim the task refuses before writing, and the error surfaces at the read.
  REQUIRE_THROWS_WITH(values(scatter(self, 0, ids({0, 3}, {2}, d), 1.0)),
                      Catch::Contains("scatter: index 3"));
  REQUIRE_THROWS_WITH(scatter(self, 0, ids({0}, {1}, d), input({1, 2}, {1, 2}, d, false)),
                      Catch::Contains("scatter: src"));
  const Tensor ints = zeros({3}, TensorOptions().dtype(DType::kInt64).device(d));
  REQUIRE_THROWS_WITH(scatter(ints, 0, ids({0}, {1}, d), 1.0), Catch::Contains("scatter"));
}

}  // namespace
}  // namespace streamgrad

// index_put_ / index_put (ops/index_put.cc) against values worked by hand, as the
// reference's Tensor.index_put_ (test_indexing.py's index_put cases and test_torch's
// accumulate cases, ported): int64 indices broadcast together over self's leading dims,
// negative positions, bool masks, values broadcast to the indexed shape, duplicates
// (summed when accumulating), non-contiguous self; gradients by hand and against central
// differences (first and second order); the in-place rules; float16 / bfloat16 against
// float32; the errors.
#include <catch2/catch.hpp>

#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::check_values;
using testing::expect_error;
using testing::input;
using testing::test_device;
using testing::values;

Tensor ids(const std::vector<int64_t>& v, const Shape& shape, Device d) {
  return from_vector(v, shape, TensorOptions().dtype(DType::kInt64).device(d));
}

Tensor bits(const std::vector<bool>& v, const Shape& shape, Device d) {
  return from_vector(v, shape, TensorOptions().dtype(DType::kBool).device(d));
}

Tensor grid(Device d, bool grad = false) {
  return input({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}, d, grad);
}

TEST_CASE("index_put writes values at advanced-index positions", "[ops][index_put]") {
  const Device d = test_device();
  // One index over dim 0 of [3, 4]: whole rows; a [4] row broadcasts to both.
  check_values(index_put(grid(d), {ids({2, 0}, {2}, d)}, input({-1, -2, -3, -4}, {4}, d, false)),
               {-1, -2, -3, -4, 4, 5, 6, 7, -1, -2, -3, -4});
  // Two indices, broadcast [2, 1] x [2] -> [2, 2]: elements (0,1) (0,3) (2,1) (2,3).
  check_values(index_put(grid(d), {ids({0, 2}, {2, 1}, d), ids({1, 3}, {2}, d)},
                         input({10, 20, 30, 40}, {2, 2}, d, false)),
               {0, 10, 2, 20, 4, 5, 6, 7, 8, 30, 10, 40});
  // Negative positions count from the end; a 0-dim value fills every position.
  check_values(index_put(grid(d), {ids({-1}, {1}, d), ids({-4}, {1}, d)},
                         input({7.5}, {}, d, false)),
               {0, 1, 2, 3, 4, 5, 6, 7, 7.5, 9, 10, 11});
  // A 0-dim index drops its dim: values [4] for a row.
  check_values(index_put(grid(d), {ids({1}, {}, d)}, input({1, 2, 3, 4}, {4}, d, false)),
               {0, 1, 2, 3, 1, 2, 3, 4, 8, 9, 10, 11});
  // Out of place: self is unchanged.
  const Tensor self = grid(d);
  index_put(self, {ids({0}, {1}, d)}, input({5}, {}, d, false));
  check_values(self, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // No positions: nothing written.
  check_values(index_put(self, {ids({}, {0}, d)}, input({5}, {}, d, false)), values(self));
}

TEST_CASE("index_put accumulates duplicates, and assigns one of them", "[ops][index_put]") {
  const Device d = test_device();
  const Tensor self = input({1, 1, 1, 1}, {4}, d, false);
  const Tensor v = input({1, 2, 3, 4, 5}, {5}, d, false);
  const Tensor idx = ids({0, 2, 0, -2, 3}, {5}, d);
  check_values(index_put(self, {idx}, v, true), {5, 1, 7, 6});
  // Assigned: position 0 and 2 are each written twice; the result is one of the writes.
  const std::vector<double> got = values(index_put(self, {idx}, v));
  CHECK((got[0] == 1 || got[0] == 3));
  CHECK((got[2] == 2 || got[2] == 4));
  CHECK(got[1] == 1);
  CHECK(got[3] == 5);
  // Accumulating rows of a [3, 2] with repeated row indices, values broadcast.
  const Tensor m = input({0, 0, 0, 0, 0, 0}, {3, 2}, d, false);
  check_values(index_put(m, {ids({1, 1, 1, 0}, {4}, d)}, input({1, 10}, {2}, d, false), true),
               {1, 10, 3, 30, 0, 0});
}

TEST_CASE("index_put takes bool masks as their nonzero positions", "[ops][index_put]") {
  const Device d = test_device();
  // A [3] mask over dim 0.
  check_values(index_put(grid(d), {bits({true, false, true}, {3}, d)}, input({-1}, {}, d, false)),
               {-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1});
  // A [3, 4] mask over both dims: values in row-major order of the set elements.
  const Tensor mask =
      bits({false, true, false, false, false, false, false, false, true, false, false, true},
           {3, 4}, d);
  check_values(index_put(grid(d), {mask}, input({100, 200, 300}, {3}, d, false)),
               {0, 100, 2, 3, 4, 5, 6, 7, 200, 9, 10, 300});
  // A mask beside an int64 index: rows 0 and 2, column 1 of each.
  check_values(index_put(grid(d), {bits({true, false, true}, {3}, d), ids({1}, {1}, d)},
                         input({5, 6}, {2}, d, false), true),
               {0, 6, 2, 3, 4, 5, 6, 7, 8, 15, 10, 11});
  expect_error<IndexError>(
      [&] { index_put(grid(d), {bits({true, false}, {2}, d)}, input({1}, {}, d, false)); },
      {"index_put", "bool mask", "[2]", "dims 0..0", "[3, 4]"});
}

TEST_CASE("index_put_ writes in place through any layout", "[ops][index_put]") {
  const Device d = test_device();
  Tensor a = grid(d);
  const uint32_t v0 = a.version();
  Tensor& r = index_put_(a, {ids({1}, {1}, d), ids({2}, {1}, d)}, input({-5}, {1}, d, false));
  CHECK(&r == &a);
  CHECK(a.version() == v0 + 1);
  check_values(a, {0, 1, 2, 3, 4, 5, -5, 7, 8, 9, 10, 11});
  // A transposed self ([4, 3] view of [3, 4]): its leading dims do not merge.
  Tensor base = grid(d);
  Tensor t = transpose(base, 0, 1);
  index_put_(t, {ids({0, 3}, {2}, d), ids({2, 0}, {2}, d)}, input({-1, -2}, {2}, d, false));
  check_values(base, {0, 1, 2, -2, 4, 5, 6, 7, -1, 9, 10, 11});
  // A column view (stride 4): merges, written in place.
  Tensor col = slice(base, 1, 0, 1);  // [3, 1], stride 4
  index_put_(col, {ids({2}, {1}, d)}, input({42}, {}, d, false), true);
  check_values(base, {0, 1, 2, -2, 4, 5, 6, 7, 41, 9, 10, 11});
  // values that view self are read before the write.
  Tensor s = input({1, 2, 3}, {3}, d, false);
  index_put_(s, {ids({1, 2}, {2}, d)}, slice(s, 0, 0, 2));
  check_values(s, {1, 1, 2});
}

TEST_CASE("index_put's gradients: self's zeroed where written, values' gathered",
          "[ops][index_put]") {
  const Device d = test_device();
  const Tensor idx = ids({0, 2, 0}, {3}, d);
  const Tensor w = input({1, 2, 3, 4}, {4}, d, false);
  for (const bool acc : {false, true}) {
    INFO("accumulate " << acc);
    const Tensor self = input({0, 0, 0, 0}, {4}, d);
    const Tensor v = input({0}, {}, d);  // broadcast to the three positions
    sum(mul(index_put(self, {idx}, v, acc), w)).backward();
    check_values(self.grad(), acc ? std::vector<double>{1, 2, 3, 4}
                                  : std::vector<double>{0, 2, 0, 4});
    check_values(v.grad(), {1 + 3 + 1});
  }
  // Rows of a [3, 2] with a [2] value row: values' gradient sums over the rows written.
  const Tensor m = input({0, 0, 0, 0, 0, 0}, {3, 2}, d);
  const Tensor row = input({0, 0}, {2}, d);
  sum(mul(index_put(m, {ids({2, 0}, {2}, d)}, row), input({1, 2, 3, 4, 5, 6}, {3, 2}, d, false)))
      .backward();
  check_values(m.grad(), {0, 0, 3, 4, 0, 0});
  check_values(row.grad(), {1 + 5, 2 + 6});
}

TEST_CASE("index_put's gradients match central differences, first and second order",
          "[ops][index_put]") {
  const Device d = test_device();
  const Tensor i0 = ids({1, -1}, {2, 1}, d);
  for (const bool acc : {false, true}) {
    INFO("accumulate " << acc);
    // Assigned duplicates: only the winner reaches the result, while values' gradient
    // reaches all of them (as in the reference), so differences need distinct positions.
    const Tensor i1 = acc ? ids({0, 2, 0}, {3}, d) : ids({0, 2, 1}, {3}, d);
    const auto f = [&](const TensorList& t) { return index_put(t[0], {i0, i1}, t[1], acc); };
    testing::check_gradients(f, {testing::random_input({3, 3, 2}, d, 1),
                                 testing::random_input({3, 2}, d, 2)});
    testing::check_second_order(
        [&](const TensorList& t) {
          const Tensor y = index_put(mul(t[0], t[0]), {i1}, mul(t[1], t[1]), acc);
          return mul(y, y);
        },
        {testing::random_input({3, 2}, d, 3), testing::random_input({1, 2}, d, 4)});
  }
}

TEST_CASE("index_put_ follows the in-place rules", "[ops][index_put]") {
  const Device d = test_device();
  const Tensor v = input({1}, {}, d, false);
  Tensor leaf = grid(d, true);
  expect_error<Error>([&] { index_put_(leaf, {ids({0}, {1}, d)}, v); },
                      {"index_put_", "leaf", "requires grad"});
  Tensor view = slice(leaf, 0, 0, 2);
  expect_error<Error>([&] { index_put_(view, {ids({0}, {1}, d)}, v); },
                      {"index_put_", "view of a leaf"});
  {
    NoGradGuard no_grad;
    index_put_(leaf, {ids({0}, {1}, d), ids({0}, {1}, d)}, v);
  }
  CHECK(values(leaf)[0] == 1);
  // A tensor saved for backward and then written is reported by that backward.
  const Tensor x = input({1, 2, 3}, {3}, d);
  Tensor y = mul(x, 2.0);
  Tensor z = mul(y, y);  // saves y
  index_put_(y, {ids({0}, {1}, d)}, input({0}, {}, d, false));
  REQUIRE_THROWS_WITH(sum(z).backward(), Catch::Contains("in-place operation"));
  // Through a view of a non-leaf: the base's gradient sees the write.
  const Tensor p = input({1, 2, 3, 4}, {2, 2}, d);
  Tensor q = mul(p, 1.0);
  Tensor r = slice(q, 1, 1, 2);  // column 1, [2, 1]
  const Tensor val = input({5}, {}, d);
  index_put_(r, {ids({1}, {1}, d)}, val);
  sum(mul(q, q)).backward();
  check_values(p.grad(), {2, 4, 6, 0});
  check_values(val.grad(), {10});
}

TEST_CASE("index_put in float16 and bfloat16 matches float32", "[ops][index_put]") {
  const Device d = test_device();
  const Tensor idx = ids({2, 0, 2}, {3}, d);
  const Tensor self = input({0.5, 1.5, -2, 3}, {4}, d, false);
  const Tensor v = input({0.25, 1, 2}, {3}, d, false);
  for (const DType dt : {DType::kFloat16, DType::kBFloat16}) {
    INFO(dtype_name(dt));
    for (const bool acc : {false, true}) {
      const Tensor distinct = ids({2, 0, 1}, {3}, d);
      const Tensor want = index_put(to(self, DType::kFloat32), {distinct},
                                    to(v, DType::kFloat32), acc);
      const Tensor got = index_put(to(self, dt), {distinct}, to(v, dt), acc);
      CHECK(got.dtype() == dt);
      check_values(to(to(got, DType::kFloat32), DType::kFloat64),
                   values(to(want, DType::kFloat64)));
    }
    const Tensor sum16 = index_put(to(self, dt), {idx}, to(v, dt), true);
    check_values(to(sum16, DType::kFloat64), {1.5, 1.5, 0.25, 3});
  }
}

TEST_CASE("index_put refuses bad input", "[ops][index_put][errors]") {
  const Device d = test_device();
  const Tensor self = grid(d);
  const Tensor one = input({1}, {}, d, false);
  // Out of range: nothing is written (on sim the task refuses, and the error surfaces at
  // the read).
  REQUIRE_THROWS_AS(values(index_put(self, {ids({0, 3}, {2}, d)}, one)), IndexError);
  REQUIRE_THROWS_WITH(values(index_put(self, {ids({0}, {1}, d), ids({1, -5}, {2}, d)}, one)),
                      Catch::Contains("index_put: the index for dim 1 of self") &&
                          Catch::Contains("-4..3") && Catch::Contains("is -5"));
  Tensor a = grid(d);
  REQUIRE_THROWS_AS(values(index_put_(a, {ids({4}, {1}, d)}, one)), ValueError);
  check_values(a, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // (1, 4) would flatten to 8, a valid position: still nothing is written, also on sim
  // where the tasks after the failed check run before the error surfaces.
  REQUIRE_THROWS_WITH(values(index_put_(a, {ids({1}, {1}, d), ids({4}, {1}, d)}, one, true)),
                      Catch::Contains("dim 1") && Catch::Contains("is 4"));
  check_values(a, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  expect_error<IndexError>([&] { index_put(self, {ids({0}, {1}, d), ids({0}, {1}, d),
                                                  ids({0}, {1}, d)}, one); },
                           {"index_put", "too many indices", "3 index tensors", "2 dims"});
  expect_error<ValueError>([&] { index_put(self, {}, one); }, {"index_put", "at least one"});
  expect_error<ValueError>([&] { index_put(self, {input({0}, {1}, d, false)}, one); },
                           {"index_put", "int64", "bool"});
  expect_error<ValueError>([&] { index_put(self, {ids({0, 1}, {2}, d), ids({0, 1, 2}, {3}, d)},
                                           one); },
                           {"index_put"});
  expect_error<ValueError>([&] { index_put(self, {ids({0, 1}, {2}, d)},
                                           input({1, 2, 3}, {3}, d, false)); },
                           {"index_put", "values", "[2, 4]"});
  expect_error<ValueError>([&] { index_put(self, {ids({0}, {1}, d)},
                                           to(one, DType::kFloat32)); },
                           {"index_put", "dtypes differ"});
  const Tensor ints = zeros({3}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>([&] { index_put(ints, {ids({0}, {1}, d)}, ints); },
                           {"index_put", "floating"});
  expect_error<DeviceError>([&] { index_put(self, {ids({0}, {1}, Device("sim:1"))}, one); },
                            {"index_put"});
}

}  // namespace
}  // namespace streamgrad

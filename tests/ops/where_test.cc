// Comparisons, where, masked_fill and masked_fill_: values (NaN, broadcasting, int64 and
// bool operands), gradients against hand-computed values and central differences (first
// and second order), the branch not taken, errors, and cpu/sim agreement. Behaviours
// follow PyTorch's (test_torch.py / test_autograd.py and the OpInfo samples of where and
// masked_fill), ported, not copied.
#include <cmath>
#include <limits>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor bools(const std::vector<bool>& v, const Shape& shape, Device d) {
  return from_vector<bool>(v, shape, TensorOptions().dtype(DType::kBool).device(d));
}

Tensor int64s(const std::vector<int64_t>& v, const Shape& shape, Device d) {
  return from_vector<int64_t>(v, shape, TensorOptions().dtype(DType::kInt64).device(d));
}

std::vector<bool> bits(const Tensor& t) {
  REQUIRE(t.dtype() == DType::kBool);
  return t.to_vector<bool>();
}

TEST_CASE("comparisons give bool tensors without history; NaN compares false but for ne",
          "[ops][where]") {
  const Device d = test_device();
  const Tensor x = input({1, kNaN, -2, 3}, {4}, d);
  const Tensor y = input({1, 0, -1, kInf}, {4}, d, false);
  CHECK(bits(eq(x, y)) == std::vector<bool>{true, false, false, false});
  CHECK(bits(ne(x, y)) == std::vector<bool>{false, true, true, true});
  CHECK(bits(lt(x, y)) == std::vector<bool>{false, false, true, true});
  CHECK(bits(le(x, y)) == std::vector<bool>{true, false, true, true});
  CHECK(bits(gt(x, y)) == std::vector<bool>{false, false, false, false});
  CHECK(bits(ge(x, y)) == std::vector<bool>{true, false, false, false});
  CHECK(bits(x == 1.0) == std::vector<bool>{true, false, false, false});
  CHECK(bits(x != 1.0) == std::vector<bool>{false, true, true, true});
  CHECK(bits(x < 1.0) == std::vector<bool>{false, false, true, false});
  CHECK(bits(x <= 1.0) == std::vector<bool>{true, false, true, false});
  CHECK(bits(x > 1.0) == std::vector<bool>{false, false, false, true});
  CHECK(bits(x >= 1.0) == std::vector<bool>{true, false, false, true});
  // The scalar on the left flips the comparison.
  CHECK(bits(1.0 < x) == bits(x > 1.0));
  CHECK(bits(1.0 >= x) == bits(x <= 1.0));
  const Tensor m = gt(x, 0.0);
  CHECK(m.dtype() == DType::kBool);
  CHECK(m.device() == d);
  CHECK_FALSE(m.requires_grad());
  CHECK(m.grad_fn() == nullptr);
}

TEST_CASE("comparisons broadcast and handle int64, bool and float32 operands as PyTorch",
          "[ops][where]") {
  const Device d = test_device();
  const Tensor col = input({0, 2}, {2, 1}, d, false);
  const Tensor row = input({0, 1, 2}, {3}, d, false);
  const Tensor m = ge(col, row);
  CHECK(m.sizes() == Shape{2, 3});
  CHECK(bits(m) == std::vector<bool>{true, false, false, true, true, true});
  // An int64 tensor against a fractional scalar compares exactly (PyTorch promotes to a
  // floating type; no element equals 0.5).
  const Tensor i = int64s({0, 1, 2}, {3}, d);
  CHECK(bits(gt(i, 0.5)) == std::vector<bool>{false, true, true});
  CHECK(bits(eq(i, 0.5)) == std::vector<bool>{false, false, false});
  CHECK(bits(eq(i, 1.0)) == std::vector<bool>{false, true, false});
  // Large int64 values are not rounded through double: 2^53 + 1 != 2^53.
  const Tensor big = int64s({(int64_t{1} << 53) + 1}, {1}, d);
  CHECK(bits(eq(big, 9007199254740992.0)) == std::vector<bool>{false});
  CHECK(bits(gt(big, 9007199254740992.0)) == std::vector<bool>{true});
  // Bool operands compare as 0 and 1.
  const Tensor b = bools({true, false}, {2}, d);
  CHECK(bits(eq(b, 1.0)) == std::vector<bool>{true, false});
  CHECK(bits(ne(b, bools({true, true}, {2}, d))) == std::vector<bool>{false, true});
  // A float32 tensor compares with the scalar rounded to float32: 0.1f == 0.1.
  const Tensor f = from_vector<float>({0.1f}, {1}, TensorOptions().device(d));
  CHECK(bits(eq(f, 0.1)) == std::vector<bool>{true});
}

TEST_CASE("where broadcasts condition, input and other and routes each gradient",
          "[ops][where]") {
  const Device d = test_device();
  const Tensor c = bools({true, false, true}, {3}, d);
  const Tensor a = input({10, 20}, {2, 1}, d);
  const Tensor b = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  const Tensor y = where(c, a, b);
  REQUIRE(y.sizes() == Shape{2, 3});
  CHECK(y.device() == d);
  check_values(y, {10, 2, 10, 20, 5, 20});
  // d sum(y * w) / da: w summed over the selected columns of each row; other gets w
  // where the condition is false.
  const Tensor w = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  const TensorList g = grad({sum(mul(y, w))}, {a, b});
  check_values(g[0], {1 + 3, 4 + 6});
  CHECK(g[0].sizes() == Shape{2, 1});
  check_values(g[1], {0, 2, 0, 0, 5, 0});
  check_gradients([&](const TensorList& t) { return where(c, t[0], t[1]); }, {a, b});
  check_second_order([&](const TensorList& t) { return mul(where(c, t[0], t[1]), t[1]); },
                     {a, b});
}

TEST_CASE("where with 0-dim operands, one leaf on both sides, and int64 / bool values",
          "[ops][where]") {
  const Device d = test_device();
  const Tensor s = input({2.5}, {}, d);
  const Tensor y = where(bools({true}, {}, d), s, input({-1}, {}, d, false));
  CHECK(y.dim() == 0);
  CHECK(y.item<double>() == 2.5);
  // A 0-dim other against a [2,2] input gets the sum over the false positions.
  const Tensor a = input({1, 2, 3, 4}, {2, 2}, d);
  const Tensor c = bools({true, false, false, false}, {2, 2}, d);
  check_values(grad({sum(where(c, a, s))}, {s})[0], {3});
  // The same leaf on both sides gets the whole gradient.
  check_values(grad({sum(where(c, a, a))}, {a})[0], {1, 1, 1, 1});
  // Non-floating values select too (no gradient).
  const Tensor i = where(c, int64s({1, 2, 3, 4}, {2, 2}, d), int64s({-1}, {}, d));
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, -1, -1, -1});
  const Tensor m = where(c, bools({false}, {}, d), bools({true}, {}, d));
  CHECK(bits(m) == std::vector<bool>{false, true, true, true});
}

// PyTorch: where's backward masks the incoming gradient, so NaN or inf in the values of
// the branch not taken reach neither the result nor the other operand's gradient. A NaN
// created by the backward of the op *feeding* the branch not taken still appears:
// 0 * (1/0) in log's backward, PyTorch issue 52248. The usual fix is to make the input
// safe before the op (log(where(x > 0, x, 1))).
TEST_CASE("NaN in the branch not taken leaks into neither the result nor where's gradient",
          "[ops][where]") {
  const Device d = test_device();
  const Tensor a = input({kNaN, 1, kInf}, {3}, d);
  const Tensor b = input({4, kNaN, 6}, {3}, d);
  const Tensor c = bools({false, true, false}, {3}, d);
  const Tensor y = where(c, a, b);
  check_values(y, {4, 1, 6});
  const TensorList g = grad({sum(y)}, {a, b});
  check_values(g[0], {0, 1, 0});
  check_values(g[1], {1, 0, 1});

  const Tensor x = input({0, 4}, {2}, d);
  const Tensor z = where(gt(x, 0.0), log(x), zeros_like(x));
  check_values(z, {0, std::log(4.0)});
  const std::vector<double> leaked = values(grad({sum(z)}, {x})[0]);
  CHECK(std::isnan(leaked[0]));  // as PyTorch: 0 * (1 / 0) in log's backward
  CHECK(leaked[1] == 0.25);
  const Tensor safe = where(gt(x, 0.0), log(where(gt(x, 0.0), x, ones_like(x))), zeros_like(x));
  check_values(grad({sum(safe)}, {x})[0], {0, 0.25});
}

TEST_CASE("masked_fill with a scalar or a 0-dim tensor value, broadcasting", "[ops][where]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  const Tensor row = bools({true, false, true}, {3}, d);
  const Tensor y = masked_fill(x, row, -1.5);
  check_values(y, {-1.5, 2, -1.5, -1.5, 5, -1.5});
  // The filled positions get no gradient.
  check_values(grad({sum(y)}, {x})[0], {0, 1, 0, 0, 1, 0});
  // A 0-dim value tensor: its gradient is the gradient summed over the filled positions.
  const Tensor v = input({-kInf}, {}, d);
  const Tensor w = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  const Tensor z = masked_fill(x, row, v);
  CHECK(values(z) == std::vector<double>{-kInf, 2, -kInf, -kInf, 5, -kInf});
  const Tensor fin = input({0.5}, {}, d);
  const TensorList g = grad({sum(mul(masked_fill(x, row, fin), w))}, {x, fin});
  check_values(g[0], {0, 2, 0, 0, 5, 0});
  check_values(g[1], {1 + 3 + 4 + 6});
  // Out of place, the input broadcasts with the mask (PyTorch's expand_outplace).
  const Tensor r = input({7, 8}, {2}, d);
  const Tensor grid = bools({true, false, false, false}, {2, 2}, d);
  const Tensor out = masked_fill(r, grid, fin);
  CHECK(out.sizes() == Shape{2, 2});
  check_values(out, {0.5, 8, 7, 8});
  check_values(grad({sum(out)}, {r})[0], {1, 2});
  // 0-dim input and 0-dim mask.
  check_values(masked_fill(input({3}, {}, d, false), bools({true}, {}, d), 9.0), {9});
  check_gradients([&](const TensorList& t) { return masked_fill(t[0], row, t[1]); }, {x, fin});
  check_second_order(
      [&](const TensorList& t) { return mul(masked_fill(t[0], row, t[1]), t[0]); }, {x, fin});
}

TEST_CASE("masked_fill stores the value in the input's dtype or refuses it", "[ops][where]") {
  const Device d = test_device();
  const Tensor m = bools({true, false}, {2}, d);
  CHECK(masked_fill(int64s({1, 2}, {2}, d), m, 7.0).to_vector<int64_t>() ==
        std::vector<int64_t>{7, 2});
  CHECK(bits(masked_fill(bools({false, false}, {2}, d), m, 1.0)) ==
        std::vector<bool>{true, false});
  expect_error<ValueError>([&] { masked_fill(int64s({1, 2}, {2}, d), m, 1.5); },
                           {"masked_fill", "1.5", "int64"});
  expect_error<ValueError>([&] { masked_fill(bools({true, true}, {2}, d), m, 2.0); },
                           {"masked_fill", "bool"});
  const Tensor f = from_vector<float>({1, 2}, {2}, TensorOptions().device(d));
  expect_error<ValueError>([&] { masked_fill(f, m, 1e39); }, {"masked_fill", "float32"});
  CHECK(std::isinf(masked_fill(f, m, -kInf).to_vector<float>()[0]));
}

TEST_CASE("masked_fill_ writes in place, bumps the version and rebases history",
          "[ops][where]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  const Tensor v = input({-2}, {}, d);
  const Tensor row = bools({false, true, false}, {3}, d);
  Tensor t = mul(x, 2.0);
  const uint32_t before = t.version();
  Tensor& same = masked_fill_(t, row, v);
  CHECK(&same == &t);
  CHECK(t.version() == before + 1);
  check_values(t, {2, -2, 6, 8, -2, 12});
  const TensorList g = grad({sum(t)}, {x, v});
  check_values(g[0], {2, 0, 2, 2, 0, 2});
  check_values(g[1], {2});
  Tensor u = clone(x);
  masked_fill_(u, row, 0.0);
  check_values(grad({sum(u)}, {x})[0], {1, 0, 1, 1, 0, 1});
  check_gradients(
      [&](const TensorList& in) {
        Tensor c = clone(in[0]);
        return masked_fill_(c, row, in[1]);
      },
      {x, v});
  check_second_order(
      [&](const TensorList& in) {
        Tensor c = mul(in[0], in[0]);
        return masked_fill_(c, row, in[1]);
      },
      {x, v});
  // Integer tensors, no grad.
  Tensor i = int64s({1, 2, 3}, {3}, d);
  masked_fill_(i, row, 9.0);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 9, 3});
}

TEST_CASE("where, masked_fill and comparisons refuse bad dtypes and shapes", "[ops][where]") {
  const Device d = test_device();
  const Tensor a = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  const Tensor b = input({1, 2}, {2}, d);
  const Tensor m = bools({true, false, true}, {3}, d);
  const Tensor fm = input({1, 0, 1}, {3}, d, false);
  const Tensor i1 = int64s({1}, {1}, d);
  const Tensor m2 = bools({true, false}, {2}, d);
  const Tensor m21 = bools({true, false}, {2, 1}, d);
  const Tensor f0 = from_vector<float>({1}, {}, TensorOptions().device(d));
  Tensor r = input({1, 2, 3}, {3}, d, false);
  Tensor leaf = input({1, 2, 3}, {3}, d);
  // Nothing below allocates and keeps memory: each error comes before any allocation.
  const int64_t allocated = memory_stats(d).allocated_bytes.current;
  expect_error<ValueError>([&] { where(fm, a, a); },
                           {"where", "expected a bool condition", "float64[3]"});
  expect_error<ValueError>([&] { where(m, a, b); },
                           {"where", "condition [3], input [2, 3] and other [2]",
                            "cannot be broadcast"});
  expect_error<ValueError>([&] { where(m, a, i1); },
                           {"where", "float64[2, 3]", "int64[1]", "different dtypes"});
  expect_error<ValueError>([&] { where(Tensor(), a, a); }, {"where", "condition", "undefined"});
  expect_error<ValueError>([&] { masked_fill(a, fm, 0.0); }, {"masked_fill", "bool mask"});
  expect_error<ValueError>([&] { masked_fill(a, m2, 0.0); },
                           {"masked_fill", "[2]", "[2, 3]", "cannot be broadcast"});
  expect_error<ValueError>([&] { masked_fill(a, m, b); },
                           {"masked_fill", "0-dim", "float64[2]"});
  expect_error<ValueError>([&] { masked_fill(a, m, f0); },
                           {"masked_fill", "float32[]", "different dtypes"});
  expect_error<ValueError>([&] { lt(a, i1); }, {"lt", "dtypes differ"});
  expect_error<ValueError>([&] { gt(a, b); }, {"gt", "cannot be broadcast"});
  // In place: the mask may not grow the tensor, leaves that require grad are refused.
  expect_error<ValueError>([&] { masked_fill_(r, m21, 0.0); },
                           {"masked_fill_", "cannot be broadcast"});
  expect_error<Error>([&] { masked_fill_(leaf, m, 0.0); }, {"masked_fill_", "leaf"});
  CHECK(r.version() == 0);
  check_values(leaf, {1, 2, 3});
  CHECK(memory_stats(d).allocated_bytes.current == allocated);
}

TEST_CASE("mixed devices are a DeviceError; 0-dim cpu operands act as scalars",
          "[ops][where]") {
  const Device sim("sim:0");
  const Device cpu("cpu");
  const Tensor a = input({1, 2, 3}, {3}, sim);
  const Tensor m = bools({true, false, true}, {3}, sim);
  expect_error<DeviceError>([&] { where(bools({true, false, true}, {3}, cpu), a, a); },
                            {"where", "bool[3] on cpu", "float64[3] on sim:0"});
  expect_error<DeviceError>([&] { where(m, a, input({1, 2, 3}, {3}, cpu)); },
                            {"where", "on cpu", "sim:0", "0-dim cpu"});
  expect_error<DeviceError>([&] { masked_fill(a, bools({true, false, true}, {3}, cpu), 0.0); },
                            {"masked_fill", "cpu", "sim:0"});
  expect_error<DeviceError>([&] { gt(a, input({1, 2, 3}, {3}, cpu, false)); },
                            {"gt", "cpu", "sim:0"});
  Tensor t = input({1, 2, 3}, {3}, sim, false);
  expect_error<DeviceError>([&] { masked_fill_(t, bools({true, false, true}, {3}, cpu), 0.0); },
                            {"masked_fill_", "cpu", "sim:0"});
  // A 0-dim cpu tensor beside sim tensors is a scalar; its gradient comes back on cpu.
  const Tensor s = input({-1}, {}, cpu);
  const Tensor y = where(m, a, s);
  CHECK(y.device() == sim);
  check_values(y, {1, -1, 3});
  const Tensor gs = grad({sum(y)}, {s})[0];
  CHECK(gs.device() == cpu);
  check_values(gs, {1});
  check_values(masked_fill(a, m, s), {-1, 2, -1});
  CHECK(bits(gt(a, input({1.5}, {}, cpu, false))) == std::vector<bool>{false, true, true});
  CHECK(bits(eq(int64s({1, 2}, {2}, sim), int64s({2}, {}, cpu))) ==
        std::vector<bool>{false, true});
}

TEST_CASE("a condition modified after where is reported by where's backward", "[ops][where]") {
  const Device d = test_device();
  const Tensor a = input({1, 2}, {2}, d);
  Tensor m = bools({true, false}, {2}, d);
  const Tensor y = where(m, a, zeros_like(a));
  masked_fill_(m, m, 0.0);
  expect_error<Error>([&] { y.backward(ones_like(y)); }, {"WhereBackward"});
}

TEST_CASE("cpu and sim give the same values and gradients", "[ops][where]") {
  struct Result {
    std::vector<double> y, ga, gb;
    std::vector<bool> m;
  };
  const auto run = [](Device d) {
    const Tensor a = random_input({4, 5}, d, 1);
    const Tensor b = random_input({5}, d, 2);
    const Tensor m = gt(random_input({4, 1}, d, 3, -1, 1), 0.0);
    const Tensor y = masked_fill(where(lt(a, b), a, b), m, -0.25);
    const Tensor w = random_input({4, 5}, d, 4);
    const TensorList g = grad({sum(mul(y, w))}, {a, b});
    return Result{values(y), values(g[0]), values(g[1]), bits(le(a, b))};
  };
  const Result c = run(Device("cpu"));
  const Result s = run(Device("sim:0"));
  CHECK(c.y == s.y);
  CHECK(c.ga == s.ga);
  CHECK(c.gb == s.gb);
  CHECK(c.m == s.m);
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

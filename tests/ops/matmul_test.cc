// matmul: 2-D, batched 3-D, a 2-D operand or a batch of 1 broadcast over the batch, and
// every other rank the reference accepts; bmm; values, gradients (first and second order,
// transposed operands), errors.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("matmul forward values", "[ops][matmul]") {
  const Device d = test_device();
  const Tensor a = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  const Tensor b = input({1, 0, 0, 1, 1, 1}, {3, 2}, d, false);
  const Tensor c = matmul(a, b);
  CHECK(c.sizes() == Shape{2, 2});
  check_values(c, {4, 5, 10, 11});
  // Transposed operands: a^T [3,2] @ a [2,3].
  check_values(matmul(transpose(a, 0, 1), a), {17, 22, 27, 22, 29, 36, 27, 36, 45});
  // Batched with a broadcast 2-D right operand.
  const Tensor batch = input({1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 0, 1}, {2, 2, 3}, d, false);
  const Tensor bc = matmul(batch, b);
  CHECK(bc.sizes() == Shape{2, 2, 2});
  check_values(bc, {4, 5, 10, 11, 1, 0, 1, 1});
  // float32 too.
  const Tensor f = from_vector<float>({1, 2, 3, 4}, {2, 2}, TensorOptions().device(d));
  CHECK(matmul(f, f).to_vector<float>() == std::vector<float>{7, 10, 15, 22});
}

// The reference's matmul for every rank, against a product written with broadcast mul and
// sum ([..., M, K, 1] * [..., 1, K, N] summed over K), which shares no code with the gemm.
TEST_CASE("matmul of every rank agrees with broadcast mul and sum", "[ops][matmul]") {
  const Device d = test_device();
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{3}, {3}, {}},                 // dot
      {{3}, {3, 2}, {2}},             // vector x matrix
      {{2, 3}, {3}, {2}},             // matrix x vector
      {{4, 2, 3}, {3}, {4, 2}},       // batch x vector
      {{3}, {4, 3, 2}, {4, 2}},       // vector x batch
      {{2, 2, 2, 3}, {3, 2}, {2, 2, 2, 2}},     // folded into one gemm
      {{2, 3}, {2, 2, 3, 4}, {2, 2, 2, 4}},     // 2-D x 4-D
      {{2, 1, 2, 3}, {4, 3, 2}, {2, 4, 2, 2}},  // batch dims broadcast
      {{1, 2, 3}, {3, 1, 3, 2}, {3, 1, 2, 2}},
  };
  uint64_t seed = 40;
  for (const Case& c : cases) {
    INFO(Tensor(zeros(c.a)).describe() << " @ " << Tensor(zeros(c.b)).describe());
    const Tensor a = random_input(c.a, d, ++seed, -1, 1);
    const Tensor b = random_input(c.b, d, ++seed, -1, 1);
    const Tensor out = matmul(a, b);
    CHECK(out.sizes() == c.out);
    const Tensor a2 = c.a.size() == 1 ? unsqueeze(a, 0) : a;
    const Tensor b2 = c.b.size() == 1 ? unsqueeze(b, 1) : b;
    Tensor want = sum(mul(unsqueeze(a2, -1), unsqueeze(b2, -3)), {-2});
    if (c.b.size() == 1) want = squeeze(want, -1);
    if (c.a.size() == 1) want = squeeze(want, -2 + (c.b.size() == 1 ? 1 : 0));
    REQUIRE(want.sizes() == c.out);
    const std::vector<double> got = out.to_vector<double>(), exp = want.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(exp[i]).epsilon(1e-12));
    check_gradients([](const TensorList& x) { return matmul(x[0], x[1]); }, {a, b});
  }
}

TEST_CASE("matmul gradients", "[ops][matmul][grad]") {
  const Device d = test_device();
  const Tensor a2 = random_input({2, 3}, d, 31);
  const Tensor b2 = random_input({3, 4}, d, 32);
  const Tensor a3 = random_input({2, 2, 3}, d, 33);
  const Tensor b3 = random_input({2, 3, 4}, d, 34);
  const Tensor b1 = random_input({1, 3, 4}, d, 35);
  const auto mm = [](const TensorList& x) { return matmul(x[0], x[1]); };

  SECTION("2-D") {
    check_gradients(mm, {a2, b2});
    check_second_order(mm, {a2, b2});
    check_second_order([](const TensorList& x) { return matmul(x[0], mul(x[1], x[1])); }, {a2, b2});
  }
  SECTION("3-D x 3-D") {
    check_gradients(mm, {a3, b3});
    check_second_order(mm, {a3, b3});
  }
  SECTION("2-D operand broadcast over the batch") {
    check_gradients(mm, {a3, b2});
    check_gradients(mm, {a2, b3});
    check_second_order(mm, {a3, b2});
    check_second_order(mm, {a2, b3});
  }
  SECTION("batch of 1 broadcast") {
    check_gradients(mm, {a3, b1});
    check_second_order([](const TensorList& x) { return matmul(mul(x[0], x[0]), x[1]); }, {a3, b1});
  }
  SECTION("non-contiguous operands") {
    const Tensor at = random_input({3, 2}, d, 36);
    const Tensor bt = random_input({2, 4, 3}, d, 37);
    check_gradients(
        [](const TensorList& x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 1, 2)); },
        {at, bt});
    check_gradients([](const TensorList& x) { return matmul(x[0], slice(x[1], 1, 0, 4, 2)); },
                    {a2, b2});
  }
  SECTION("only one operand requires grad") {
    const Tensor fixed = random_input({3, 4}, d, 38).detach();
    check_gradients([fixed](const TensorList& x) { return matmul(x[0], fixed); }, {a2});
    check_second_order([fixed](const TensorList& x) { return matmul(mul(x[0], x[0]), fixed); },
                       {a2});
  }
}

TEST_CASE("matmul errors", "[ops][matmul][errors]") {
  expect_error<ValueError>(
      [] {
        matmul(zeros({2, 3}), zeros({4, 2}));
      },
      {"matmul", "[2, 3]", "[4, 2]"});
  expect_error<ValueError>([] { matmul(zeros({}), zeros({3, 2})); },
                           {"matmul", "at least one dimension", "float32[]"});
  expect_error<ValueError>([] { matmul(zeros({3}), zeros({4})); },
                           {"matmul", "3 elements", "4 elements"});
  expect_error<ValueError>([] { matmul(zeros({2, 3, 2, 3}), zeros({4, 3, 2})); },
                           {"matmul", "[2, 3]", "[4]"});
  expect_error<ValueError>([] { bmm(zeros({2, 2, 3}), zeros({3, 3, 2})); },
                           {"bmm", "[2, 3, N]", "[3, 3, 2]"});
  expect_error<ValueError>([] { bmm(zeros({2, 3}), zeros({3, 2})); }, {"bmm", "3-D"});
  expect_error<ValueError>(
      [] {
        matmul(zeros({2, 2, 3}), zeros({3, 3, 2}));
      },
      {"matmul", "batch", "2 vs 3"});
  expect_error<ValueError>(
      [] {
        matmul(zeros({2, 2}), zeros({2, 2}, TensorOptions().dtype(DType::kFloat64)));
      },
      {"matmul", "float32", "float64"});
  expect_error<DeviceError>(
      [] {
        matmul(zeros({2, 2}, TensorOptions().device(Device("sim:0"))),
               zeros({2, 2}, TensorOptions().device(Device("sim:1"))));
      },
      {"matmul", "sim:0", "sim:1"});
  expect_error<ValueError>(
      [] {
        const TensorOptions i = TensorOptions().dtype(DType::kInt64);
        matmul(zeros({2, 2}, i), zeros({2, 2}, i));
      },
      {"matmul", "int64"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

// cumsum (values against running sums written out here, every dim, 0-dim and size-1
// dims, non-contiguous inputs, long dims), its gradient (the reverse running sum, by hand
// and against central differences, first and second order), errors; and arange(end),
// the one-argument form of the factory. Behaviours follow PyTorch's cumsum / arange
// (test_reductions.py, test_tensor_creation_ops.py), ported.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("cumsum gives running sums along a dim", "[ops][cumsum]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  check_values(cumsum(x, 1), {1, 3, 6, 4, 9, 15});
  check_values(cumsum(x, -1), {1, 3, 6, 4, 9, 15});
  check_values(cumsum(x, 0), {1, 2, 3, 5, 7, 9});
  check_values(x.cumsum(0), values(cumsum(x, 0)));
  CHECK(cumsum(x, 1).sizes() == Shape{2, 3});
  // Non-contiguous input.
  check_values(contiguous(cumsum(transpose(x, 0, 1), 0)), {1, 4, 3, 9, 6, 15});
  // 0-dim and size-1 dims: a copy, not the input itself.
  const Tensor s = input({2.5}, {}, d);
  const Tensor cs = cumsum(s, 0);
  check_values(cs, {2.5});
  CHECK_FALSE(cs.is_same(s));
  check_values(cumsum(input({7}, {1}, d), -1), {7});
  CHECK(cumsum(input({}, {0, 2}, d), 0).sizes() == Shape{0, 2});
  // A long dim, not a power of two: every element against a sequential double sum.
  const int64_t n = 37;
  std::vector<double> v(n), want(n);
  double run = 0;
  for (int64_t i = 0; i < n; ++i) {
    v[i] = std::sin(static_cast<double>(i));
    run += v[i];
    want[i] = run;
  }
  check_values(cumsum(input(v, {n}, d), 0), want, 1e-12);
  // float32 keeps its dtype.
  const Tensor f = from_vector<float>({1, 2, 3}, {3}, TensorOptions().device(d));
  CHECK(cumsum(f, 0).dtype() == DType::kFloat32);
  CHECK(cumsum(f, 0).to_vector<float>() == std::vector<float>{1, 3, 6});
}

TEST_CASE("the gradient of cumsum is the reverse running sum", "[ops][cumsum]") {
  const Device d = test_device();
  const Tensor x = input({1, 2, 3, 4, 5}, {5}, d);
  cumsum(x, 0).backward(input({1, 2, 3, 4, 5}, {5}, d, false));
  check_values(x.grad(), {15, 14, 12, 9, 5});
  check_gradients([](const TensorList& t) { return cumsum(t[0], 1); },
                  {random_input({2, 7, 2}, d, 1)});
  check_gradients([](const TensorList& t) { return cumsum(t[0], 0); },
                  {random_input({5, 3}, d, 2)});
  check_second_order([](const TensorList& t) { return mul(cumsum(t[0], 0), t[0]); },
                     {random_input({6}, d, 3)});
}

TEST_CASE("cumsum rejects bad dims and non-floating inputs", "[ops][cumsum]") {
  const Device d = test_device();
  expect_error<ValueError>([&] { cumsum(input({1, 2}, {2}, d), 1); }, {"cumsum", "1"});
  const Tensor i = from_vector<int64_t>({1, 2}, {2}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>([&] { cumsum(i, 0); }, {"cumsum", "int64"});
}

// A float32 input whose running sums round differently in every order but left to
// right: the kernel must sum each line sequentially in double and round each prefix once.
std::vector<float> awkward(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng) * (1 + static_cast<float>(rng() % 1000));
  return v;
}

TEST_CASE("cumsum sums long lines left to right in double, in one launch", "[ops][cumsum]") {
  const Device d = test_device();
  const int64_t n = 100000;
  const std::vector<float> v = awkward(n, 5);
  std::vector<float> want(n);
  double run = 0;
  for (int64_t i = 0; i < n; ++i) {
    run += static_cast<double>(v[i]);
    want[i] = static_cast<float>(run);
  }
  const Tensor x = from_vector<float>(v, {n}, TensorOptions().device(d));
  Tensor y;
  {
    KernelNames seen;
    y = cumsum(x, 0);
    synchronize(d);
    CHECK(seen.names == std::vector<std::string>{"cumsum"});
  }
  CHECK(y.to_vector<float>() == want);
  // The same line along the outer dim of a [n, 2] tensor (lines with stride 2).
  const Tensor two = contiguous(transpose(stack({x, x}, 0), 0, 1));
  const std::vector<float> col = contiguous(narrow(cumsum(two, 0), 1, 1, 1)).to_vector<float>();
  CHECK(col == want);
  // The gradient of a long cumsum: the reverse running sum, exact for ones.
  const Tensor leaf = zeros({n}, f64(d)).requires_grad_();
  cumsum(leaf, 0).backward(ones({n}, f64(d)));
  const std::vector<double> g = values(leaf.grad());
  bool exact = true;
  for (int64_t i = 0; i < n; ++i) exact = exact && g[i] == static_cast<double>(n - i);
  CHECK(exact);
}

TEST_CASE("cumsum gives the same bits on one thread and on several", "[ops][cumsum]") {
  const Device d = test_device();
  const int previous = get_num_threads();
  // 700 x 600 float32: more than one parallel grain of lines along either dim.
  const Tensor x =
      from_vector<float>(awkward(700 * 600, 9), {700, 600}, TensorOptions().device(d));
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    for (int64_t dim : {0, 1}) runs.push_back(cumsum(x, dim).to_vector<float>());
    const Tensor leaf = to(x, DType::kFloat64).requires_grad_();
    cumsum(leaf, 1).backward(to(x, DType::kFloat64));
    const std::vector<double> g = values(leaf.grad());
    runs.emplace_back(g.begin(), g.end());
  }
  set_num_threads(previous);
  for (size_t i = 3; i < runs.size(); ++i) CHECK(runs[i] == runs[i % 3]);
  // Each column of the dim-0 scan is the sequential double sum of that column.
  const std::vector<float> v = x.to_vector<float>();
  bool exact = true;
  for (int64_t c = 0; c < 600; c += 37) {
    double run = 0;
    for (int64_t r = 0; r < 700; ++r) {
      run += static_cast<double>(v[r * 600 + c]);
      exact = exact && runs[0][r * 600 + c] == static_cast<float>(run);
    }
  }
  CHECK(exact);
}

TEST_CASE("cumsum in float16 and bfloat16 sums in float32 or better", "[ops][cumsum]") {
  const Device d = test_device();
  const DType low = GENERATE(DType::kFloat16, DType::kBFloat16);
  const Tensor x =
      to(from_vector<float>(awkward(300, 3), {3, 100}, TensorOptions().device(d)), low);
  const Tensor y = cumsum(x, 1);
  CHECK(y.dtype() == low);
  // The float32 scan of the same values, rounded once to the 16-bit dtype.
  const Tensor want = to(cumsum(to(x, DType::kFloat32), 1), low);
  CHECK(to(y, DType::kFloat32).to_vector<float>() ==
        to(want, DType::kFloat32).to_vector<float>());
  // Differentiable: the gradient keeps the dtype.
  const Tensor leaf = x.detach().requires_grad_();
  sum(cumsum(leaf, 0)).backward();
  CHECK(leaf.grad().dtype() == low);
  std::vector<double> rows;
  for (double r : {3, 2, 1}) rows.insert(rows.end(), 100, r);
  check_values(to(leaf.grad(), DType::kFloat64), rows);
}

TEST_CASE("arange(end) counts from 0 in steps of 1", "[ops][cumsum]") {
  const Device d = test_device();
  check_values(arange(5, f64(d)), {0, 1, 2, 3, 4});
  check_values(arange(2.5, f64(d)), {0, 1, 2});
  CHECK(arange(0, f64(d)).numel() == 0);
  CHECK(arange(-3, f64(d)).numel() == 0);
  CHECK(arange(4).dtype() == DType::kFloat32);
  CHECK(arange(3, TensorOptions().dtype(DType::kInt64).device(d)).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2});
  // The running sum of ones is arange shifted by one.
  check_values(cumsum(ones({4}, f64(d)), 0), values(add(arange(4, f64(d)), 1.0)));
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

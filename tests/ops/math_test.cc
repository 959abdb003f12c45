// exp, log, sqrt, pow, tanh, sigmoid, relu, abs: values, gradients (first and second
// order, non-contiguous inputs), errors.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("math forward values", "[ops][math]") {
  const Device d = test_device();
  const Tensor x = input({-2, -0.5, 0, 1, 4}, {5}, d, false);
  const Tensor p = input({0.25, 1, 4}, {3}, d, false);
  check_values(exp(p), {std::exp(0.25), std::exp(1.0), std::exp(4.0)});
  check_values(log(p), {std::log(0.25), 0, std::log(4.0)});
  check_values(sqrt(p), {0.5, 1, 2});
  check_values(pow(p, 2), {0.0625, 1, 16});
  check_values(pow(p, -0.5), {2, 1, 0.5});
  check_values(pow(p, 0), {1, 1, 1});
  check_values(tanh(x), {std::tanh(-2.0), std::tanh(-0.5), 0, std::tanh(1.0), std::tanh(4.0)});
  check_values(sigmoid(input({0, 2}, {2}, d, false)), {0.5, 1 / (1 + std::exp(-2.0))});
  check_values(relu(x), {0, 0, 0, 1, 4});
  check_values(abs(x), {2, 0.5, 0, 1, 4});
  // float32 works too.
  const Tensor f = from_vector<float>({1, 4}, {2}, TensorOptions().device(d));
  CHECK(sqrt(f).to_vector<float>() == std::vector<float>{1, 2});
}

TEST_CASE("math gradients", "[ops][math][grad]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3}, d, 11, -2, 2, /*gap=*/0.05);
  const Tensor pos = random_input({2, 3}, d, 12, 0.5, 3);
  const Tensor xt = random_input({3, 2}, d, 13, -2, 2, 0.05);  // used transposed

  using F = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, F>> everywhere = {
      {"exp", &exp}, {"tanh", &tanh}, {"sigmoid", &sigmoid}, {"relu", &relu}, {"abs", &abs}};
  const std::vector<std::pair<const char*, F>> positive = {{"log", &log}, {"sqrt", &sqrt}};

  SECTION("first order, contiguous and transposed") {
    for (const auto& [name, fn] : everywhere) {
      INFO(name);
      F g = fn;
      check_gradients([g](const TensorList& in) { return g(in[0]); }, {x});
      check_gradients([g](const TensorList& in) { return g(transpose(in[0], 0, 1)); }, {xt});
    }
    for (const auto& [name, fn] : positive) {
      INFO(name);
      F g = fn;
      check_gradients([g](const TensorList& in) { return g(in[0]); }, {pos});
      check_gradients([g](const TensorList& in) { return g(slice(in[0], 1, 0, 3, 2)); }, {pos});
    }
    for (double e : {2.0, 3.0, 0.5, -1.5, 1.0, 0.0}) {
      INFO("pow " << e);
      check_gradients([e](const TensorList& in) { return pow(in[0], e); }, {pos});
    }
    check_gradients([](const TensorList& in) { return pow(in[0], 3.0); }, {x});
  }
  SECTION("second order") {
    for (const auto& [name, fn] : everywhere) {
      INFO(name);
      F g = fn;
      // relu and abs: zero almost everywhere, which central differences agree with.
      check_second_order([g](const TensorList& in) { return g(mul(in[0], in[0])); }, {x});
      check_second_order([g](const TensorList& in) { return g(in[0]); }, {x});
    }
    for (const auto& [name, fn] : positive) {
      INFO(name);
      F g = fn;
      check_second_order([g](const TensorList& in) { return g(in[0]); }, {pos});
    }
    for (double e : {2.0, 3.0, 0.5, -1.5}) {
      INFO("pow " << e);
      check_second_order([e](const TensorList& in) { return pow(in[0], e); }, {pos});
    }
  }
  SECTION("third order through exp") {
    // d³/dx³ sum(exp(x)) = exp(x): differentiate the second gradient again.
    Tensor leaf = input({0.3, -0.2}, {2}, d);
    Tensor g1 = grad({sum(exp(leaf))}, {leaf}, {}, true, true)[0];
    Tensor g2 = grad({sum(g1)}, {leaf}, {}, true, true)[0];
    Tensor g3 = grad({sum(g2)}, {leaf})[0];
    check_values(g3, {std::exp(0.3), std::exp(-0.2)});
  }
}

TEST_CASE("relu's backward is one kernel and passes nothing where x <= 0, even inf or NaN",
          "[ops][math][grad]") {
  const Device d = test_device();
  const Tensor x = input({-1, 0, 2, 3}, {4}, d);
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor g = input({inf, std::nan(""), 5, -inf}, {4}, d, false);
  const std::vector<double> want = {0, 0, 5, -inf};
  {
    KernelNames seen;
    const TensorList gx = grad({relu(x)}, {x}, {g});
    seen.names.erase(seen.names.begin());  // relu's own forward
    CHECK(seen.names == std::vector<std::string>{"relu_backward"});
    CHECK(values(gx[0]) == want);
  }
  // Under create_graph: the same values, differentiable in g.
  const Tensor gg = input({inf, std::nan(""), 5, -inf}, {4}, d);
  const TensorList gx = grad({relu(x)}, {x}, {gg}, /*retain_graph=*/true, /*create_graph=*/true);
  CHECK(gx[0].requires_grad());
  CHECK(values(gx[0]) == want);
}

TEST_CASE("math errors", "[ops][math][errors]") {
  const Tensor i = zeros({3}, TensorOptions().dtype(DType::kInt64));
  expect_error<ValueError>([&] { exp(i); }, {"exp", "int64[3]", "float"});
  expect_error<ValueError>([&] { relu(i); }, {"relu", "int64"});
  expect_error<ValueError>([&] { pow(i, 2); }, {"pow", "int64"});
  expect_error<ValueError>([&] { log(Tensor()); }, {"log", "undefined"});
}

TEST_CASE("math saves its input: in-place change is reported by backward", "[ops][math][version]") {
  const Device d = test_device();
  Tensor x = input({0.5, 1.5}, {2}, d);
  Tensor y = mul(x, 1.0);  // non-leaf
  Tensor l = log(y);
  add_(y, input({1, 1}, {2}, d, false));
  expect_error<Error>([&] { sum(l).backward(); }, {"LogBackward", "version"});
}

// As in the reference, exp, tanh and sigmoid keep their output, not their input: a later
// in-place change of the input does not matter, one of the output is reported.
TEST_CASE("exp, tanh and sigmoid save their output", "[ops][math][version]") {
  const Device d = test_device();
  using Op = Tensor (*)(const Tensor&);
  const std::pair<Op, const char*> op = GENERATE(
      std::make_pair(Op(&exp), "ExpBackward"), std::make_pair(Op(&tanh), "TanhBackward"),
      std::make_pair(Op(&sigmoid), "SigmoidBackward"));
  INFO(op.second);
  Tensor x = input({0.5, -1.5}, {2}, d);
  Tensor y = mul(x, 1.0);
  Tensor out = op.first(y);
  const std::vector<double> want = op.first(x.detach()).to_vector<double>();
  add_(y, input({1, 1}, {2}, d, false));
  sum(out).backward();
  const std::vector<double> got = x.grad().to_vector<double>();
  for (size_t i = 0; i < 2; ++i) {
    const double v = want[i];
    const double dv = op.second[0] == 'E' ? v : op.second[0] == 'T' ? 1 - v * v : v * (1 - v);
    CHECK(got[i] == Approx(dv).epsilon(1e-12));
  }
  Tensor out2 = op.first(mul(x, 1.0));
  mul_(out2, 2.0);
  expect_error<Error>([&] { sum(out2).backward(); }, {op.second, "version"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

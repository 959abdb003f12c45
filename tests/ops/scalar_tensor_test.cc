// 0-dim cpu tensors beside tensors on another device act as scalars in add, sub, mul, div,
// add_ and mul_: forward values, gradients to both (the cpu scalar's as a 0-dim cpu
// tensor), first and second order against finite differences, the value read on the host
// when the op is called, and the errors for anything larger.
//
// Reference behaviour: PyTorch lets a 0-dim cpu tensor take part in element-wise ops with
// cuda tensors as a scalar, and refuses any other cpu tensor ("Expected all tensors to be
// on the same device"); the cpu tensor's gradient is a 0-dim cpu tensor (test_cuda.py,
// "test_cuda_cpu_scalar" style tests; test_autograd.py, "test_cpu_scalar_cuda_grad" style
// tests).
#include <functional>

#include "runtime/observe/stream_sanitizer.h"
#include "runtime/sim/sim.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

const Device kSim("sim:0");
const Device kCpu("cpu");

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
       [](double a, double b) { return a + b; }},
      {"add alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, -2.5); },
       [](double a, double b) { return a - 2.5 * b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
       [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
       [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
       [](double a, double b) { return a / b; }},
  };
}

TEST_CASE("a 0-dim cpu tensor acts as a scalar beside a sim tensor", "[ops][cpu_scalar]") {
  const std::vector<double> v{1.5, -2, 3, 0.75, -1.25, 2.5};
  const Tensor t = input(v, {2, 3}, kSim, false);
  const Tensor s = input({-0.8}, {}, kCpu, false);
  for (const BinaryCase& c : binary_cases()) {
    INFO(c.name);
    const Tensor right = c.op(t, s);
    const Tensor left = c.op(s, t);
    CHECK(right.device() == kSim);
    CHECK(left.device() == kSim);
    CHECK(right.sizes() == Shape{2, 3});
    std::vector<double> want_right, want_left;
    for (double x : v) {
      want_right.push_back(c.ref(x, -0.8));
      want_left.push_back(c.ref(-0.8, x));
    }
    check_values(right, want_right);
    check_values(left, want_left);
    // A 0-dim sim tensor with a cpu scalar: the result is a 0-dim sim tensor.
    const Tensor zero_dim = c.op(input({2}, {}, kSim, false), s);
    CHECK(zero_dim.device() == kSim);
    CHECK(zero_dim.dim() == 0);
    check_values(zero_dim, {c.ref(2, -0.8)});
  }
}

TEST_CASE("gradients reach the sim tensor and the cpu scalar", "[ops][cpu_scalar][grad]") {
  const Tensor t = random_input({2, 3}, kSim, 11, 0.5, 1.5);
  const Tensor s = input({0.7}, {}, kCpu);
  for (const BinaryCase& c : binary_cases()) {
    INFO(c.name);
    const Tensor y = c.op(t, s);
    const TensorList g = grad({sum(y)}, {t, s});
    CHECK(g[0].device() == kSim);
    REQUIRE(g[1].device() == kCpu);
    CHECK(g[1].dim() == 0);
    const Fn right = [&c](const TensorList& x) { return c.op(x[0], x[1]); };
    const Fn left = [&c](const TensorList& x) { return c.op(x[1], x[0]); };
    check_gradients(right, {t, s});
    check_gradients(left, {t, s});
    check_second_order(right, {t, s});
    check_second_order(left, {t, s});
  }
}

TEST_CASE("a cpu scalar used twice accumulates one cpu gradient, in a clean stream order",
          "[ops][cpu_scalar][grad][streams]") {
  for (uint64_t seed = 0; seed < 16; ++seed) {
    INFO("adversarial seed " << seed);
    SimSchedulerScope scope({SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, seed, 0});
    StreamSanitizer san(StreamSanitizer::Mode::kCollect);
    const Tensor t = input({1, 2, 3}, {3}, kSim);
    const Tensor s = input({2}, {}, kCpu);
    const Stream side = Stream::create(kSim);
    StreamGuard on_side(side);
    // y = t * s + s  =>  dy/ds summed = sum(t) + 3 = 9, dy/dt = s = 2.
    const Tensor y = add(mul(t, s), s);
    sum(y).backward();
    REQUIRE(s.grad().device() == kCpu);
    CHECK(s.grad().dim() == 0);
    CHECK(s.grad().item<double>() == 9);
    check_values(t.grad(), {2, 2, 2});
    for (const SanitizerFinding& f : san.findings()) INFO(f.message);
    CHECK(san.findings().empty());
  }
}

// PyTorch reads a cpu scalar when the op is called: changing it afterwards does not change
// a result the device has not computed yet.
TEST_CASE("the cpu scalar's value is read when the op is called", "[ops][cpu_scalar][streams]") {
  SimSchedulerScope scope({SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, 3, 0});
  Tensor s = input({4}, {}, kCpu, false);
  const Tensor t = input({1, 2}, {2}, kSim, false);
  const Tensor y = mul(t, s);  // nothing has run on sim:0 yet
  fill_(s, 100);
  check_values(y, {4, 8});
}

TEST_CASE("in-place add_ and mul_ take a cpu scalar operand", "[ops][cpu_scalar][inplace]") {
  const Tensor s = input({-1.5}, {}, kCpu, false);
  Tensor a = input({1, 2, 3}, {3}, kSim, false);
  add_(a, s, 2.0);
  check_values(a, {-2, -1, 0});
  mul_(a, s);
  check_values(a, {3, 1.5, 0});
  // Gradients through a clone (a leaf that requires grad cannot be modified in place).
  const Tensor x = random_input({2, 3}, kSim, 5);
  const Tensor k = input({0.6}, {}, kCpu);
  const Fn add_in_place = [](const TensorList& in) {
    Tensor c = clone(in[0]);
    return add_(c, in[1], -0.5);
  };
  const Fn mul_in_place = [](const TensorList& in) {
    Tensor c = clone(in[0]);
    return mul_(c, in[1]);
  };
  check_gradients(add_in_place, {x, k});
  check_gradients(mul_in_place, {x, k});
  check_second_order(mul_in_place, {x, k});
  const TensorList g = grad({sum(mul_in_place({x, k}))}, {k});
  CHECK(g[0].device() == kCpu);
  CHECK(g[0].dim() == 0);
}

TEST_CASE("cpu tensors that are not 0-dim stay a DeviceError beside a sim tensor",
          "[ops][cpu_scalar][errors]") {
  const Tensor t = input({1, 2, 3}, {3}, kSim, false);
  const Tensor one = input({2}, {1}, kCpu, false);  // one element, but 1-D
  const std::vector<std::string> parts{"on one device", "on cpu", "on sim:0", "0-dim"};
  for (const BinaryCase& c : binary_cases()) {
    INFO(c.name);
    expect_error<DeviceError>([&] { c.op(t, one); }, parts);
    expect_error<DeviceError>([&] { c.op(one, t); }, parts);
  }
  Tensor a = input({1, 2, 3}, {3}, kSim, false);
  expect_error<DeviceError>([&] { add_(a, one); }, {"add_", "cpu", "sim:0"});
  expect_error<DeviceError>([&] { mul_(a, one); }, {"mul_", "cpu", "sim:0"});
  // The tensor written in place keeps its device: a cpu scalar cannot take a sim operand.
  Tensor s = input({2}, {}, kCpu, false);
  expect_error<DeviceError>([&] { add_(s, input({1}, {}, kSim, false)); }, {"add_", "sim:0"});
  check_values(a, {1, 2, 3});
  check_values(s, {2});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

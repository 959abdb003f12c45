// gradcheck must reject wrong backwards that a check with unit gradients, fixed
// grad_outputs or unchecked outputs lets through; each planted defect is a custom
// Function or Node, each behaviour one TEST_CASE, on cpu and sim. Behaviours follow the
// reference framework's gradcheck (torch.autograd.gradcheck / gradgradcheck).
#include <catch2/catch.hpp>
#include <atomic>

#include "gradcheck/gradcheck.h"
#include "engine/node.h"
#include "tests/gradcheck/gradcheck_test_util.h"

namespace streamgrad {
namespace {

using testing::f64;
using testing::quiet;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// sum(a * b) whose backward ignores the incoming gradient: right only when it is 1. The
// reference framework catches it by running backward with zero grad_outputs (slow mode's
// rows are seeded with exactly 1, so they are right); fast mode's random projection of the
// output sees it first.
struct UnscaledDot : Function<UnscaledDot> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0], in[1]});
    return {sum(mul(in[0], in[1]))};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList&) {
    const TensorList s = ctx.saved_tensors();
    return {s[1], s[0]};
  }
};

TEST_CASE("a backward that ignores the size of its incoming gradient is rejected",
          "[gradcheck]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const bool fast = GENERATE(false, true);
  TensorList in{randn({3}, f64(d)).requires_grad_(), randn({3}, f64(d)).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) { return UnscaledDot::apply(x, "UnscaledDot"); };
  const GradcheckResult r = gradcheck(f, in, quiet(fast));
  INFO(r.message);
  CHECK_FALSE(r.passed);
  CHECK(r.input_index == 0);
  if (fast) {
    CHECK(r.output_index == 0);
    CHECK(contains(r.message, "output 0 with respect to input 0"));
  } else {
    CHECK(contains(r.message, "backward is not multiplied by grad_output"));
    CHECK(r.analytical == in[1].to_vector<double>()[0]);  // backward(0) returned b itself
  }
}

// y0 = 2x, y1 = 3x from one node; its backward adds 3 * grads[1], and when grads[1] is
// undefined (nobody differentiated y1) it either takes it as ones or dereferences it.
enum class AbsentGrad { kAsOnes, kThrows, kAsZeros };
struct TwoOutputBackward : Node {
  explicit TwoOutputBackward(AbsentGrad a) : absent(a) {}
  AbsentGrad absent;
  std::string name() const override { return "TwoOutputBackward"; }
  TensorList apply(TensorList&& g) override {
    Tensor g1 = g[1];
    if (!g1.defined() && absent == AbsentGrad::kAsOnes) g1 = ones_like(g[0]);
    if (!g1.defined() && absent == AbsentGrad::kAsZeros) g1 = zeros_like(g[0]);
    Tensor g0 = g[0].defined() ? g[0] : zeros_like(g1);
    return {add(mul(g0, 2.0), mul(g1, 3.0))};  // mul throws on an undefined g1
  }
};

TensorList two_outputs(const Tensor& x, AbsentGrad absent) {
  auto node = std::make_shared<TwoOutputBackward>(absent);
  node->set_next_edges(collect_next_edges({x}));
  Tensor y0, y1;
  {
    NoGradGuard no_grad;
    y0 = mul(x, 2.0);
    y1 = mul(x, 3.0);
  }
  set_history(y0, node);
  set_history(y1, node);
  return {y0, y1};
}

TEST_CASE("check_undefined_grad: a backward that mishandles an absent output gradient",
          "[gradcheck]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const bool fast = GENERATE(false, true);
  const AbsentGrad absent = GENERATE(AbsentGrad::kAsOnes, AbsentGrad::kThrows);
  TensorList in{randn({3}, f64(d)).requires_grad_()};
  GradcheckFn f = [absent](const TensorList& x) { return two_outputs(x[0], absent); };
  GradcheckResult r;
  REQUIRE_NOTHROW(r = gradcheck(f, in, quiet(fast)));  // a failed result, not a crash
  INFO(r.message);
  CHECK_FALSE(r.passed);
  CHECK(contains(r.message, "mishandles an undefined output gradient"));
  CHECK_THROWS_AS(gradcheck(f, in), GradcheckError);
  GradcheckOptions off = quiet(fast);
  off.check_undefined_grad = false;  // all gradients seeded (zeros): the values are right
  CHECK(gradcheck(f, in, off).passed);
  GradcheckFn right = [](const TensorList& x) { return two_outputs(x[0], AbsentGrad::kAsZeros); };
  CHECK(gradcheck(right, in, quiet(fast)).passed);
}

// 2x whose backward (without materialized zeros) is right for every defined gradient
// but returns ones when its gradient is absent, or dereferences the absent gradient.
template <bool kThrows>
struct WrongWithoutGrad : Function<WrongWithoutGrad<kThrows>> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.set_materialize_grads(false);
    ctx.save_for_backward({in[0]});
    return {mul(in[0], 2.0)};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    if (!g[0].defined() && !kThrows) return {ones_like(ctx.saved_tensors()[0])};
    return {mul(g[0], 2.0)};
  }
};

// The reference framework's check_undefined_grad also runs backward with every output's
// gradient undefined and demands undefined or zero input gradients: with one output,
// only that check can see this defect.
TEST_CASE("check_undefined_grad: every output's gradient undefined", "[gradcheck]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const bool fast = GENERATE(false, true);
  const bool throws = GENERATE(false, true);
  TensorList in{randn({3}, f64(d)).requires_grad_()};
  GradcheckFn f = [throws](const TensorList& x) {
    return throws ? WrongWithoutGrad<true>::apply(x, "ThrowsWithoutGrad")
                  : WrongWithoutGrad<false>::apply(x, "OnesWithoutGrad");
  };
  GradcheckResult r;
  REQUIRE_NOTHROW(r = gradcheck(f, in, quiet(fast)));
  INFO(r.message);
  CHECK_FALSE(r.passed);
  CHECK(contains(r.message, "every output's gradient was undefined") ==
        throws);
  CHECK(contains(r.message, "must be undefined or zero") == !throws);
  GradcheckOptions off = quiet(fast);
  off.check_undefined_grad = false;
  CHECK(gradcheck(f, in, off).passed);
  // Built-in ops pass "no gradient" on: the check holds for them.
  GradcheckFn builtin = [](const TensorList& x) { return TensorList{mul(x[0], x[0])}; };
  CHECK(gradcheck(builtin, in, quiet(fast)).passed);
}

// Returns x[:n] where n depends on x[0]: 3 at x[0] >= 1, 1 below (and float32 with
// `to_float`), so an output changes under the -eps perturbation of element 0.
TensorList shrinking(const TensorList& x, bool to_float) {
  const bool low = x[0].to_vector<double>()[0] < 1.0;
  if (to_float) return {low ? to(x[0], DType::kFloat32) : mul(x[0], 1.0)};
  return {narrow(x[0], 0, 0, low ? 1 : 3)};
}

TEST_CASE("an output whose shape or dtype changes under perturbation is a clear error",
          "[gradcheck][errors]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const bool fast = GENERATE(false, true);
  const bool to_float = GENERATE(false, true);
  Tensor x = from_vector<double>({1.0, 2.0, 3.0}, {3}, f64(d)).requires_grad_();
  GradcheckFn f = [to_float](const TensorList& in) { return shrinking(in, to_float); };
  const std::string changed = to_float ? "float32[3] when input 0" : "float64[1] when input 0";
  CHECK_THROWS_AS(gradcheck(f, {x}, quiet(fast)), ValueError);
  CHECK_THROWS_WITH(gradcheck(f, {x}, quiet(fast)),
                    Catch::Contains("output 0 is float64[3] on the unperturbed inputs") &&
                        Catch::Contains(changed) && Catch::Contains("perturbed"));
  CHECK_THROWS_WITH(numerical_jacobian(f, {x}), Catch::Contains(changed));
  CHECK(x.to_vector<double>() == std::vector<double>{1.0, 2.0, 3.0});  // restored
}

// 2x whose backward is JitteryDouble(g) = 2g: the first-order gradient is right and
// deterministic, but the second-order backward (through JitteryDouble) is not.
struct JitteryDouble : Function<JitteryDouble> {
  static inline std::atomic<int> calls{0};
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {mul(in[0], 2.0)}; }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    // Jitter scales the gradient (as reordered sums would): zero stays zero.
    return {mul(g[0], 2.0 + 1e-9 * (calls++ % 7))};
  }
};
struct TwiceViaJittery : Function<TwiceViaJittery> {
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {mul(in[0], 2.0)}; }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    return JitteryDouble::apply({g[0]}, "JitteryDouble");
  }
};

TEST_CASE("gradgradcheck differentiates through random grad_outputs and checks determinism",
          "[gradcheck]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const bool fast = GENERATE(false, true);
  TensorList in{randn({3}, f64(d)).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) { return TwiceViaJittery::apply(x, "Twice"); };
  CHECK(gradcheck(f, in, quiet(fast)).passed);  // first order: right and deterministic
  const GradcheckResult r = gradgradcheck(f, in, quiet(fast));
  INFO(r.message);
  CHECK_FALSE(r.passed);
  CHECK(contains(r.message, "not deterministic"));
  CHECK(r.input_index == 1);  // the grad_output, the only way into JitteryDouble's backward
  GradcheckOptions tolerant = quiet(fast);
  tolerant.nondet_tol = 1e-6;
  CHECK(gradgradcheck(f, in, tolerant).passed);
}

TEST_CASE("inputs whose elements share memory are refused", "[gradcheck][errors]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  GradcheckFn f = [](const TensorList& x) { return TensorList{mul(x[0], x[1])}; };
  Tensor expanded = expand(randn({1, 3}, f64(d)), {4, 3});
  Tensor other = randn({4, 3}, f64(d)).requires_grad_();
  CHECK(gradcheck(f, {expanded, other}, quiet()).passed);  // a constant may overlap
  expanded.requires_grad_();
  CHECK_THROWS_AS(gradcheck(f, {expanded, other}, quiet()), ValueError);
  CHECK_THROWS_WITH(gradcheck(f, {expanded, other}, quiet()),
                    Catch::Contains("input 0") && Catch::Contains("strides [0, 1]") &&
                        Catch::Contains("share memory") && Catch::Contains("contiguous"));
  CHECK_THROWS_AS(gradgradcheck(f, {expanded, other}, quiet()), ValueError);
  CHECK_THROWS_AS(numerical_jacobian(f, {expanded, other}), ValueError);
  CHECK(gradcheck(f, {contiguous(expanded).detach().requires_grad_(), other}, quiet()).passed);
}

TEST_CASE("functions without differentiable outputs", "[gradcheck]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const bool fast = GENERATE(false, true);
  TensorList in{randn({3}, f64(d)).requires_grad_()};
  // Depends on x, but the graph is cut: reported as such.
  GradcheckFn cut = [](const TensorList& x) { return TensorList{mul(x[0], 2.0).detach()}; };
  const GradcheckResult r = gradcheck(cut, in, quiet(fast));
  CHECK_FALSE(r.passed);
  CHECK(contains(r.message, "no differentiable output"));
  CHECK(contains(r.message, "output 0 changes with input 0"));
  CHECK(r.numerical == Approx(2.0));
  CHECK_THROWS_AS(gradcheck(cut, in), GradcheckError);
  // No outputs at all, or outputs that do not depend on x: valid (a zero Jacobian).
  GradcheckFn none = [](const TensorList&) { return TensorList{}; };
  CHECK(gradcheck(none, in, quiet(fast)).passed);
  GradcheckFn constant = [d](const TensorList&) { return TensorList{ones({2}, f64(d))}; };
  CHECK(gradcheck(constant, in, quiet(fast)).passed);
}

// mul with the gradient of input 1 off by 1.5.
struct ScaledMul : Function<ScaledMul> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0], in[1]});
    return {mul(in[0], in[1])};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    const TensorList s = ctx.saved_tensors();
    return {mul(g[0], s[1]), mul(mul(g[0], s[0]), 1.5)};
  }
};

TEST_CASE("a fast-mode failure is confirmed in slow mode with the full Jacobians",
          "[gradcheck]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  TensorList in{from_vector<double>({1, 2, 3}, {3}, f64(d)).requires_grad_(),
                from_vector<double>({4, 5, 6}, {3}, f64(d)).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) { return ScaledMul::apply(x, "ScaledMul"); };
  const GradcheckResult r = gradcheck(f, in, quiet(/*fast=*/true));
  INFO(r.message);
  CHECK_FALSE(r.passed);
  CHECK(r.confirmed_in_slow_mode);
  CHECK(contains(r.message, "gradcheck (fast mode) failed for output 0 with respect to input 1"));
  CHECK(contains(r.message, "confirmed in slow mode"));
  CHECK(r.input_index == 1);
  CHECK(r.output_element == 2);  // the worst: 1.5 * 3 against 3 at (2, 2)
  CHECK(r.input_element == 2);
  CHECK(r.analytical == Approx(4.5));
  CHECK(r.numerical == Approx(3.0));
  REQUIRE(r.analytical_jacobian.size() == 9);
  CHECK(r.analytical_jacobian[4] == Approx(3.0));  // (1, 1): 1.5 * 2
  CHECK(r.numerical_jacobian[4] == Approx(2.0));
  CHECK_FALSE(gradcheck(f, in, quiet(/*fast=*/false)).confirmed_in_slow_mode);
}

TEST_CASE("numerical_jacobian returns d output / d input per pair", "[gradcheck]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  Tensor a = from_vector<double>({1, 2, 3}, {3}, f64(d)).requires_grad_();
  Tensor b = from_vector<double>({4, 5}, {2}, f64(d)).requires_grad_();
  Tensor c = from_vector<double>({7}, {1}, f64(d));  // a constant: no columns
  GradcheckFn f = [](const TensorList& x) {
    // out0[i] = a[i] * c, out1 = a[0] * b (2 elements)
    return TensorList{mul(x[0], x[2]), mul(narrow(x[0], 0, 0, 1), x[1])};
  };
  const JacobianTable j = numerical_jacobian(f, {a, b, c});
  REQUIRE(j.size() == 2);
  REQUIRE(j[0].size() == 3);
  CHECK(j[0][0].rows == 3);
  CHECK(j[0][0].cols == 3);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t k = 0; k < 3; ++k) CHECK(j[0][0].at(r, k) == Approx(r == k ? 7.0 : 0.0));
  }
  CHECK(j[0][1].cols == 2);
  CHECK(j[0][2].cols == 0);
  CHECK(j[0][2].values.empty());
  CHECK(j[1][0].rows == 2);
  CHECK(j[1][0].at(1, 0) == Approx(5.0));  // d out1[1] / d a[0] = b[1]
  CHECK(j[1][0].at(1, 2) == Approx(0.0).margin(1e-9));
  CHECK(j[1][1].at(0, 0) == Approx(1.0));  // d out1[0] / d b[0] = a[0]
  CHECK(j[1][1].at(0, 1) == Approx(0.0).margin(1e-9));
}

}  // namespace
}  // namespace streamgrad

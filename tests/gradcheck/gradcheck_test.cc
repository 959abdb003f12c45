// gradcheck / gradgradcheck as a library: right gradients pass, planted bugs are caught
// and reported precisely, in full and in fast mode.
#include "gradcheck/gradcheck.h"

#include <catch2/catch.hpp>
#include <atomic>

#include "tests/gradcheck/gradcheck_test_util.h"

namespace streamgrad {
namespace {

using testing::f64;
using testing::quiet;

// mul with a backward that is off by `factor` on input 1.
struct ScaledMul : Function<ScaledMul> {
  static inline double factor = 1;
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0], in[1]});
    return {mul(in[0], in[1])};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    const TensorList s = ctx.saved_tensors();
    return {mul(g[0], s[1]), mul(mul(g[0], s[0]), factor)};
  }
};

// a + b with b broadcast, whose backward forgets to reduce over the broadcast dim.
struct ForgetfulAdd : Function<ForgetfulAdd> {
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {add(in[0], in[1])}; }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    return {g[0], narrow(g[0], 0, 0, 1)};  // should be sum over dim 0
  }
};

// a * 2 + b * 3 with the two gradients swapped.
struct Swapped : Function<Swapped> {
  static TensorList forward(FunctionCtx&, const TensorList& in) {
    return {add(mul(in[0], 2.0), mul(in[1], 3.0))};
  }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    return {mul(g[0], 3.0), mul(g[0], 2.0)};
  }
};

// Right on average, but each backward adds a different tiny amount.
struct Jittery : Function<Jittery> {
  static inline std::atomic<int> calls{0};
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {mul(in[0], 2.0)}; }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    // Jitter scales the gradient (as reordered sums would): zero stays zero.
    return {mul(g[0], 2.0 + 1e-9 * (calls++ % 7))};
  }
};

TEST_CASE("correct gradients pass, on cpu and sim", "[gradcheck]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const bool fast = GENERATE(false, true);
  TensorList in{randn({2, 3}, f64(d)).requires_grad_(), randn({3}, f64(d)).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) {
    return TensorList{mul(x[0], x[1]), sum(div(x[0], add(mul(x[1], x[1]), 1.0)))};
  };
  const GradcheckResult r = gradcheck(f, in, quiet(fast));
  INFO(r.message);
  CHECK(r.passed);
  CHECK(r.max_abs_err < 1e-6);
  CHECK(gradgradcheck(f, in, quiet(fast)).passed);
}

TEST_CASE("a backward off by a factor on input 1 is reported precisely", "[gradcheck]") {
  ScaledMul::factor = 1.5;
  TensorList in{from_vector<double>({1, 2, 3}, {3}, f64()).requires_grad_(),
                from_vector<double>({4, 5, 6}, {3}, f64()).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) { return ScaledMul::apply(x, "ScaledMul"); };
  const GradcheckResult r = gradcheck(f, in, quiet());
  CHECK_FALSE(r.passed);
  CHECK(r.output_index == 0);
  CHECK(r.input_index == 1);
  CHECK(r.output_element == 2);  // the worst: |1.5*3 - 3| at element (2, 2)
  CHECK(r.input_element == 2);
  CHECK(r.analytical == Approx(4.5));
  CHECK(r.numerical == Approx(3.0));
  CHECK(r.first_output_element == 0);  // the first wrong one: (0, 0), 1.5 vs 1
  CHECK(r.first_input_element == 0);
  CHECK(r.first_analytical == Approx(1.5));
  CHECK(r.first_numerical == Approx(1.0));
  CHECK(r.message.find("first wrong Jacobian element is [0, 0]") != std::string::npos);
  CHECK(r.analytical_jacobian.size() == 9);
  CHECK(r.message.find("output 0 with respect to input 1") != std::string::npos);
  CHECK(r.message.find("analytical 4.5") != std::string::npos);
  CHECK(r.message.find("numerical 3") != std::string::npos);
  CHECK_THROWS_AS(gradcheck(f, in), GradcheckError);  // raise_exception by default
  CHECK_FALSE(gradcheck(f, in, quiet(/*fast=*/true)).passed);
  ScaledMul::factor = 1;
  CHECK(gradcheck(f, in, quiet()).passed);
}

TEST_CASE("a backward that forgets the broadcast reduction", "[gradcheck]") {
  TensorList in{randn({3, 2}, f64()).requires_grad_(), randn({1, 2}, f64()).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) { return ForgetfulAdd::apply(x, "ForgetfulAdd"); };
  const GradcheckResult r = gradcheck(f, in, quiet());
  CHECK_FALSE(r.passed);
  CHECK(r.input_index == 1);
  // Rows 1 and 2 of the output get no gradient into b: analytical 0, numerical 1.
  CHECK(r.output_element >= 2);
  CHECK(r.analytical == Approx(0.0));
  CHECK(r.numerical == Approx(1.0));
  CHECK_FALSE(gradcheck(f, in, quiet(true)).passed);
}

TEST_CASE("a backward that returns a gradient for the wrong input", "[gradcheck]") {
  TensorList in{randn({4}, f64()).requires_grad_(), randn({4}, f64()).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) { return Swapped::apply(x, "Swapped"); };
  const GradcheckResult r = gradcheck(f, in, quiet());
  CHECK_FALSE(r.passed);
  CHECK(r.input_index == 0);
  CHECK(r.analytical == Approx(3.0));
  CHECK(r.numerical == Approx(2.0));
  CHECK_FALSE(gradcheck(f, in, quiet(true)).passed);
}

TEST_CASE("nondet_tol catches a nondeterministic backward", "[gradcheck]") {
  TensorList in{randn({3}, f64()).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) { return Jittery::apply(x, "Jittery"); };
  GradcheckOptions o = quiet();
  const GradcheckResult r = gradcheck(f, in, o);
  CHECK_FALSE(r.passed);
  CHECK(r.message.find("not deterministic") != std::string::npos);
  o.nondet_tol = 1e-6;  // tolerated
  CHECK(gradcheck(f, in, o).passed);
  CHECK_FALSE(gradcheck(f, in, quiet(true)).passed);
}

// Right on one stream; with its input produced on another stream it computes on that
// stream without waiting for the incoming gradient, and hands the result over as if it
// had been produced on its own stream.
struct RacyScale : Function<RacyScale> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    return {mul(in[0], 2.0)};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    const Tensor x = ctx.saved_tensors()[0];
    Tensor out = empty_like(g[0]);
    kernels::unary_scalar(x.stream(), kernels::UnaryScalar::kMul, out.view(), g[0].view(), 2.0);
    return {out};
  }
};

TEST_CASE("stream consistency: right programs pass bit for bit", "[gradcheck][streams]") {
  TensorList in{randn({4, 3}, f64("sim:0")).requires_grad_(),
                randn({3, 2}, f64("sim:0")).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) {
    Tensor h = tanh(matmul(x[0], x[1]));
    return TensorList{sum(mul(h, h)), mean(exp(x[1]))};
  };
  const GradcheckResult r = check_stream_consistency(f, in, quiet());
  INFO(r.message);
  CHECK(r.passed);
}

TEST_CASE("stream consistency catches a backward that races across streams",
          "[gradcheck][streams]") {
  SanitizerSuppression races_on_purpose;  // the test races to show the rule
  TensorList in{randn({5}, f64("sim:0")).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) {
    Tensor a = mul(x[0], 3.0);
    Tensor b = RacyScale::apply({a}, "RacyScale")[0];
    return TensorList{sum(mul(b, 1.5))};
  };
  CHECK(gradcheck(f, in, quiet()).passed);  // on one stream it is right
  const GradcheckResult r = check_stream_consistency(f, in, quiet());
  CHECK_FALSE(r.passed);
  CHECK(r.message.find("adversarial") != std::string::npos);
  CHECK(r.message.find("op #") != std::string::npos);
  CHECK_THROWS_AS(check_stream_consistency(f, in), GradcheckError);
}

TEST_CASE("bad inputs to gradcheck are clear errors", "[gradcheck][errors]") {
  GradcheckFn f = [](const TensorList& x) { return TensorList{mul(x[0], 2.0)}; };
  CHECK_THROWS_WITH(gradcheck(f, {randn({2}, f64())}), Catch::Contains("no input requires grad"));
  GradcheckFn undefined_out = [](const TensorList&) { return TensorList{Tensor()}; };
  CHECK_THROWS_WITH(gradcheck(undefined_out, {randn({2}, f64()).requires_grad_()}),
                    Catch::Contains("undefined"));
  GradcheckFn int_out = [](const TensorList&) {
    return TensorList{zeros({2}, TensorOptions().dtype(DType::kInt64))};
  };
  CHECK_THROWS_WITH(gradcheck(int_out, {randn({2}, f64()).requires_grad_()}),
                    Catch::Contains("int64"));
  // Integer inputs are constants: never perturbed.
  GradcheckFn with_index = [](const TensorList& x) {
    return TensorList{index_select(x[0], 0, x[1])};
  };
  Tensor idx = from_vector<int64_t>({2, 0});
  CHECK(gradcheck(with_index, {randn({3}, f64()).requires_grad_(), idx}, quiet()).passed);
}

}  // namespace
}  // namespace streamgrad

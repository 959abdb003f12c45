// The libtorch C++ autograd tutorial (pytorch.org/tutorials/advanced/cpp_autograd), ported
// line by line with Tensor's method syntax, on cpu and sim:0. Every value is checked
// against what the tutorial's operations give, computed here by hand.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "engine/function.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

bool all_equal_to(const Tensor& t, float want) {
  for (float v : t.to_vector<float>()) {
    if (v != want) return false;
  }
  return true;
}

TEST_CASE("tutorial: basic autograd operations", "[ops][tutorial]") {
  const Device d = test_device();
  const TensorOptions opts = TensorOptions().device(d);
  Tensor x = ones({2, 2}, opts.requires_grad(true));
  CHECK(printed(x) == " 1  1\n 1  1\n[ " + d.str() + " float32 {2,2} ]");

  Tensor y = x + 2;
  CHECK(all_equal_to(y, 3));
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "AddBackward");

  Tensor z = y * y * 3;
  Tensor out = z.mean();
  CHECK(all_equal_to(z, 27));
  CHECK(z.grad_fn()->name() == "MulBackward");
  CHECK(out.item<double>() == 27);
  CHECK(out.grad_fn()->name() == "MeanBackward");

  // requires_grad_ switches a tensor made without it.
  manual_seed(0);
  Tensor a = randn({2, 2}, opts);
  a = ((a * 3) / (a - 1));
  CHECK_FALSE(a.requires_grad());
  a.requires_grad_(true);
  CHECK(a.requires_grad());
  Tensor b = (a * a).sum();
  CHECK(b.grad_fn()->name() == "SumBackward");

  // out = mean(3 (x + 2)^2): d out / dx = 6 (x + 2) / 4 = 4.5 at x = 1.
  out.backward();
  CHECK(all_equal_to(x.grad(), 4.5f));
  CHECK(printed(x.grad()) == " 4.5000  4.5000\n 4.5000  4.5000\n[ " + d.str() +
                                 " float32 {2,2} ]");
}

TEST_CASE("tutorial: vector-Jacobian product, NoGradGuard and detach", "[ops][tutorial]") {
  const Device d = test_device();
  const TensorOptions opts = TensorOptions().device(d);
  manual_seed(1);
  Tensor x = randn({3}, opts.requires_grad(true));
  Tensor y = x * 2;
  int doublings = 1;
  while (y.pow(2).sum().sqrt().item<double>() < 1000) {  // y.norm()
    y = y * 2;
    ++doublings;
  }
  // y = 2^k x, so the vector-Jacobian product with v is 2^k v (exact: powers of two).
  const std::vector<float> v = {0.1f, 1.0f, 0.0001f};
  const std::vector<float> xs = x.to_vector<float>();
  const std::vector<float> ys = y.to_vector<float>();
  const float scale = std::ldexp(1.0f, doublings);
  double norm2 = 0;
  for (size_t i = 0; i < 3; ++i) {
    CHECK(ys[i] == xs[i] * scale);
    norm2 += static_cast<double>(ys[i]) * ys[i];
  }
  CHECK(std::sqrt(norm2) >= 1000);
  CHECK(std::sqrt(norm2) / 2 < 1000);  // the loop stopped at the first doubling past 1000
  y.backward(from_vector<float>(v, {3}, opts));
  const std::vector<float> g = x.grad().to_vector<float>();
  for (size_t i = 0; i < 3; ++i) CHECK(g[i] == v[i] * scale);

  CHECK(x.requires_grad());
  CHECK(x.pow(2).requires_grad());
  {
    NoGradGuard no_grad;
    CHECK_FALSE(x.pow(2).requires_grad());
  }

  CHECK(x.requires_grad());
  Tensor detached = x.detach();
  CHECK_FALSE(detached.requires_grad());
  // x.eq(detached).all(): the smallest of the comparisons is true.
  CHECK(x.eq(detached).to(DType::kFloat32).min(0).first.item<bool>());
  CHECK(detached.data_ptr() == x.data_ptr());
}

TEST_CASE("tutorial: higher-order gradients (a gradient penalty)", "[ops][tutorial]") {
  const Device d = test_device();
  const TensorOptions opts = TensorOptions().device(d);
  manual_seed(2);
  // The tutorial's Linear(4, 3), as its weight and bias.
  Tensor weight = randn({3, 4}, opts.requires_grad(true));
  Tensor bias = randn({3}, opts.requires_grad(true));
  Tensor in = randn({3, 4}, opts).requires_grad_(true);
  Tensor output = linear(in, weight, bias);
  Tensor target = randn({3, 3}, opts);
  Tensor loss = mse_loss(output, target);
  Tensor grad_output = ones_like(output);
  Tensor g = grad({output}, {in}, {grad_output}, /*retain_graph=*/false,
                  /*create_graph=*/true)[0];
  Tensor gradient_penalty = (g.pow(2).sum().sqrt() - 1).pow(2);  // (g.norm() - 1)^2
  Tensor combined_loss = loss + gradient_penalty;
  combined_loss.backward();
  // g = ones @ weight does not depend on the input, so only the loss reaches in.grad:
  // d mean((out - t)^2) / d in = 2 / 9 (out - t) @ weight.
  const std::vector<float> o = output.to_vector<float>(), t = target.to_vector<float>();
  const std::vector<float> w = weight.to_vector<float>();
  const std::vector<float> got = in.grad().to_vector<float>();
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) {
      double want = 0;
      for (int k = 0; k < 3; ++k) want += 2.0 / 9 * (o[r * 3 + k] - t[r * 3 + k]) * w[k * 4 + c];
      CHECK(got[r * 4 + c] == Approx(want).epsilon(1e-5).margin(1e-6));
    }
  }
  // The penalty does reach the weight: its gradient there is 2 (|g| - 1) / |g| * 3 * s,
  // s_c = sum_k weight[k, c] (g's column c), on every row.
  double s2 = 0;
  std::vector<double> s(4, 0);
  for (int c = 0; c < 4; ++c) {
    for (int k = 0; k < 3; ++k) s[c] += w[k * 4 + c];
    s2 += 3 * s[c] * s[c];
  }
  const double n = std::sqrt(s2);
  const std::vector<float> iv = in.to_vector<float>();
  const std::vector<float> gw = weight.grad().to_vector<float>();
  for (int k = 0; k < 3; ++k) {
    for (int c = 0; c < 4; ++c) {
      double want = 2 * (n - 1) / n * 3 * s[c];
      for (int r = 0; r < 3; ++r) want += 2.0 / 9 * (o[r * 3 + k] - t[r * 3 + k]) * iv[r * 4 + c];
      CHECK(gw[k * 4 + c] == Approx(want).epsilon(1e-4).margin(1e-5));
    }
  }
}

// The tutorial's LinearFunction: saves its inputs, an optional bias among them.
struct LinearFunction : Function<LinearFunction> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    const Tensor& input = in[0];
    const Tensor& weight = in[1];
    const Tensor bias = in.size() > 2 ? in[2] : Tensor();
    ctx.save_for_backward({input, weight, bias});
    Tensor output = input.matmul(weight.t());
    if (bias.defined()) output.add_(bias.unsqueeze(0).expand(output.sizes()));
    return {output};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& grad_outputs) {
    const TensorList saved = ctx.saved_tensors();
    const Tensor& input = saved[0];
    const Tensor& weight = saved[1];
    const Tensor& bias = saved[2];
    const Tensor& grad_output = grad_outputs[0];
    Tensor grad_input = grad_output.matmul(weight);
    Tensor grad_weight = grad_output.t().matmul(input);
    Tensor grad_bias;
    if (bias.defined()) grad_bias = grad_output.sum(0);
    return {grad_input, grad_weight, grad_bias};
  }
};

// The tutorial's MulConstant: a non-tensor argument, kept in saved_data. streamgrad's
// Function<> forward takes tensors only, so the constant comes in through apply_function.
Tensor mul_constant(const Tensor& tensor, double constant) {
  return apply_function(
      "MulConstant", {tensor},
      [constant](FunctionCtx& ctx, const TensorList& in) {
        ctx.saved_data["constant"] = constant;
        return TensorList{in[0] * constant};
      },
      [](FunctionCtx& ctx, const TensorList& grad_outputs) {
        // As in the tutorial, an undefined gradient for the non-tensor argument.
        return TensorList{grad_outputs[0] * ctx.saved_data["constant"], Tensor()};
      })[0];
}

TEST_CASE("tutorial: custom autograd functions", "[ops][tutorial][function]") {
  const Device d = test_device();
  const TensorOptions opts = TensorOptions().device(d);
  manual_seed(3);
  SECTION("LinearFunction without bias") {
    Tensor x = randn({2, 3}, opts).requires_grad_();
    Tensor weight = randn({4, 3}, opts).requires_grad_();
    Tensor y = LinearFunction::apply({x, weight}, "LinearFunction")[0];
    CHECK(y.grad_fn()->name() == "LinearFunctionBackward");
    y.sum().backward();
    // d sum(x w^T) / dx[r, c] = sum_o w[o, c]; / dw[o, c] = sum_r x[r, c].
    const std::vector<float> xv = x.to_vector<float>(), wv = weight.to_vector<float>();
    const std::vector<float> gx = x.grad().to_vector<float>();
    const std::vector<float> gw = weight.grad().to_vector<float>();
    for (int c = 0; c < 3; ++c) {
      float col_w = 0, col_x = 0;
      for (int o = 0; o < 4; ++o) col_w += wv[o * 3 + c];
      for (int r = 0; r < 2; ++r) col_x += xv[r * 3 + c];
      for (int r = 0; r < 2; ++r) CHECK(gx[r * 3 + c] == Approx(col_w).epsilon(1e-5));
      for (int o = 0; o < 4; ++o) CHECK(gw[o * 3 + c] == Approx(col_x).epsilon(1e-5));
    }
  }
  SECTION("LinearFunction with bias: the same as linear()") {
    Tensor x = randn({2, 3}, opts).requires_grad_();
    Tensor weight = randn({4, 3}, opts).requires_grad_();
    Tensor bias = randn({4}, opts).requires_grad_();
    Tensor y = LinearFunction::apply({x, weight, bias}, "LinearFunction")[0];
    const TensorList got = grad({y}, {x, weight, bias}, {ones_like(y)});
    Tensor ref = linear(x, weight, bias);
    const TensorList want = grad({ref}, {x, weight, bias}, {ones_like(ref)});
    CHECK_THAT(y.to_vector<float>(),
               Catch::Matchers::Approx(ref.to_vector<float>()).epsilon(1e-5));
    for (size_t i = 0; i < 3; ++i) {
      CHECK_THAT(got[i].to_vector<float>(),
                 Catch::Matchers::Approx(want[i].to_vector<float>()).epsilon(1e-5));
    }
    CHECK(got[2].to_vector<float>() == std::vector<float>{2, 2, 2, 2});
  }
  SECTION("MulConstant") {
    Tensor x = randn({2}, opts).requires_grad_();
    Tensor y = mul_constant(x, 5.5);
    CHECK(y.grad_fn()->name() == "MulConstantBackward");
    const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
    CHECK(yv[0] == xv[0] * 5.5f);
    CHECK(yv[1] == xv[1] * 5.5f);
    y.sum().backward();
    CHECK(x.grad().to_vector<float>() == std::vector<float>{5.5f, 5.5f});
    CHECK(printed(x.grad()) == " 5.5000\n 5.5000\n[ " + d.str() + " float32 {2} ]");
  }
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

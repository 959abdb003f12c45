// What training code relies on: retain_graph, create_graph (double backward), grad() with
// explicit gradients, inputs=, hooks, retain_grad, final callbacks, NoGradGuard, anomaly
// mode, reentrant backward, custom functions.
#include <catch2/catch.hpp>
#include <cmath>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

std::vector<Device> devices() { return {Device("cpu"), Device("sim:0")}; }

TEST_CASE("retain_graph lets a graph run twice; gradients accumulate", "[engine]") {
  const Device d = GENERATE(from_range(devices()));
  Tensor x = full({2}, 3, TensorOptions().device(d)).requires_grad_();
  Tensor y = sum(mul(x, x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{12, 12});
}

TEST_CASE("create_graph: the gradient is differentiable again", "[engine][double]") {
  const Device d = GENERATE(from_range(devices()));
  Tensor x = full({1}, 2, TensorOptions().device(d).dtype(DType::kFloat64)).requires_grad_();
  Tensor y = sum(mul(mul(x, x), x));  // x^3
  TensorList g = grad({y}, {x}, {}, false, /*create_graph=*/true);
  CHECK(g[0].item<double>() == 12.0);  // 3x^2
  REQUIRE(g[0].requires_grad());
  TensorList gg = grad({sum(g[0])}, {x});
  CHECK(gg[0].item<double>() == 12.0);  // 6x
}

TEST_CASE("grad() with explicit output gradients and several inputs", "[engine]") {
  Tensor a = full({3}, 2, TensorOptions().device("sim:1")).requires_grad_();
  Tensor b = full({3}, 5, TensorOptions().device("sim:1")).requires_grad_();
  Tensor y = mul(a, b);
  Tensor go = from_vector<float>({1, 2, 3}, {3}, TensorOptions().device("sim:1"));
  TensorList g = grad({y}, {a, b}, {go});
  CHECK(g[0].to_vector<float>() == std::vector<float>{5, 10, 15});
  CHECK(g[1].to_vector<float>() == std::vector<float>{2, 4, 6});
}

TEST_CASE("backward(inputs=) accumulates only into the given tensors", "[engine]") {
  Tensor a = ones({2}).requires_grad_();
  Tensor b = ones({2}).requires_grad_();
  Tensor mid = mul(a, 3.0);
  Tensor y = sum(mul(mid, b));
  backward({y}, {}, /*retain_graph=*/true, false, {a});
  CHECK(a.grad().to_vector<float>() == std::vector<float>{3, 3});
  CHECK_FALSE(b.grad().defined());
  backward({y}, {}, false, false, {mid});  // a non-leaf input gets .grad too
  CHECK(mid.grad().to_vector<float>() == std::vector<float>{1, 1});
  CHECK(a.grad().to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("tensor hooks see and may replace gradients; retain_grad keeps them",
          "[engine][hooks]") {
  const Device d = GENERATE(from_range(devices()));
  Tensor x = ones({2}, TensorOptions().device(d)).requires_grad_();
  Tensor h = mul(x, 2.0);
  h.retain_grad();
  std::vector<float> seen;
  h.register_hook([&](const Tensor& g) {
    seen = g.to_vector<float>();
    return mul(g, 10.0);  // replace
  });
  const int id = x.register_hook([](const Tensor& g) { return add(g, 1.0); });
  sum(mul(h, 3.0)).backward();
  CHECK(seen == std::vector<float>{3, 3});
  CHECK(x.grad().to_vector<float>() == std::vector<float>{61, 61});  // 3*10*2 + 1
  x.remove_hook(id);
  x.set_grad(Tensor());
  sum(mul(mul(x, 2.0), 3.0)).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{6, 6});
  CHECK(h.grad().defined());
}

struct Cb : Function<Cb> {
  static inline bool* flag = nullptr;
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {clone(in[0])}; }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    queue_callback([] { *flag = true; });
    return {g[0]};
  }
};

TEST_CASE("final callbacks run once backward is done, on the caller", "[engine]") {
  Tensor x = ones({1}, TensorOptions().device("sim:0")).requires_grad_();
  bool ran = false;
  Cb::flag = &ran;
  sum(Cb::apply({x})[0]).backward();
  CHECK(ran);
  CHECK_THROWS_WITH(queue_callback([] {}), Catch::Contains("no backward is running"));
}

TEST_CASE("NoGradGuard records no graph", "[engine]") {
  Tensor x = ones({2}).requires_grad_();
  Tensor y;
  {
    NoGradGuard g;
    y = mul(x, 2.0);
    CHECK_FALSE(grad_mode_enabled());
  }
  CHECK(grad_mode_enabled());
  CHECK_FALSE(y.requires_grad());
  CHECK(y.grad_fn() == nullptr);
}

TEST_CASE("anomaly mode names the forward op whose backward produced NaN", "[engine][anomaly]") {
  const Device d = GENERATE(from_range(devices()));
  Tensor x = zeros({2}, TensorOptions().device(d)).requires_grad_();
  Tensor y = sum(div(1.0, x));  // d/dx 1/x = -1/x^2 = -inf at 0
  {
    AnomalyModeGuard a;
    CHECK_THROWS_WITH(y.backward(Tensor(), true),
                      Catch::Contains("DivBackward") && Catch::Contains("'div'") &&
                          Catch::Contains("NaN or Inf"));
  }
  y.backward();  // without anomaly mode: no check
  CHECK(std::isinf(x.grad().to_vector<float>()[0]));
}

struct Reentrant : Function<Reentrant> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    return {clone(in[0])};
  }
  // Computes its gradient with a backward of its own, inside the outer backward.
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    Tensor x = ctx.saved_tensors()[0];
    Tensor inner = x.detach().requires_grad_();
    Tensor y = sum(mul(mul(inner, inner), 0.5));
    TensorList dx;
    {
      GradModeGuard on(true);
      y = sum(mul(mul(inner, inner), 0.5));
      dx = grad({y}, {inner});
    }
    return {mul(g[0], dx[0])};
  }
};

TEST_CASE("reentrant backward: a backward inside a backward", "[engine][reentrant]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"), Device("sim:1"));
  Tensor x = full({3}, 4, TensorOptions().device(d)).requires_grad_();
  sum(Reentrant::apply({x}, "Reentrant")[0]).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{4, 4, 4});
}

struct Cube : Function<Cube> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    ctx.saved_data["k"] = 3;
    return {mul(mul(in[0], in[0]), in[0])};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    Tensor x = ctx.saved_tensors()[0];
    return {mul(mul(g[0], mul(x, x)), ctx.saved_data["k"])};
  }
};

TEST_CASE("custom functions: saved tensors, data, needs_input_grad", "[engine][function]") {
  const Device d = GENERATE(from_range(devices()));
  Tensor x = full({2}, 2, TensorOptions().device(d)).requires_grad_();
  Tensor y = Cube::apply({x}, "Cube")[0];
  CHECK(y.grad_fn()->name() == "CubeBackward");
  CHECK(y.to_vector<float>() == std::vector<float>{8, 8});
  sum(y).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{12, 12});
}

TEST_CASE("tensors print readably", "[engine][tensor]") {
  Tensor t = from_vector<float>({1, 2, 3, 4}, {2, 2});
  CHECK(t.str() == "tensor([[1, 2],\n [3, 4]], float32[2, 2] on cpu)");
  Tensor x = ones({1}, TensorOptions().device("sim:0")).requires_grad_();
  CHECK(mul(x, 2.0).str() == "tensor([2], float32[1] on sim:0, grad_fn=MulBackward)");
  CHECK(Tensor().str() == "tensor(undefined)");
}

}  // namespace
}  // namespace streamgrad

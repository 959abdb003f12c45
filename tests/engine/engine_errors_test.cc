// Misuse of the engine gets a clear streamgrad::Error and leaves it usable: no crash, leak
// or hang (the asan and tsan runs check the last two).
#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {


TEST_CASE("backward twice without retain_graph", "[engine][errors]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  Tensor x = ones({3}, TensorOptions().device(d)).requires_grad_();
  Tensor y = sum(mul(x, x));
  y.backward();
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("MulBackward") &&
                                      Catch::Contains("backward through the graph a second time") &&
                                      Catch::Contains("retain_graph"));
  Tensor z = sum(mul(x, x));  // the engine is still usable
  z.backward(Tensor(), /*retain_graph=*/true);
  z.backward();
  CHECK(x.grad().to_vector<float>()[0] == 6.0f);
}

TEST_CASE("backward on a non-scalar without a gradient", "[engine][errors]") {
  Tensor x = ones({2, 3}).requires_grad_();
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("float32[2, 3]") &&
                                      Catch::Contains("pass its gradient explicitly"));
}

TEST_CASE("gradient of the wrong shape, dtype or device", "[engine][errors]") {
  Tensor x = ones({2, 3}, TensorOptions().device("sim:0")).requires_grad_();
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH(y.backward(ones({3, 2}, TensorOptions().device("sim:0"))),
                    Catch::Contains("float32[3, 2] on sim:0") &&
                        Catch::Contains("float32[2, 3] on sim:0"));
  CHECK_THROWS_WITH(
      y.backward(ones({2, 3}, TensorOptions().device("sim:0").dtype(DType::kFloat64))),
      Catch::Contains("float64[2, 3]"));
  CHECK_THROWS_WITH(y.backward(ones({2, 3}, TensorOptions().device("sim:1"))),
                    Catch::Contains("on sim:1"));
  y.backward(ones({2, 3}, TensorOptions().device("sim:0")));  // the right one still works
  CHECK(x.grad().to_vector<float>()[5] == 2.0f);
}

TEST_CASE("grad() of an input not in the graph", "[engine][errors]") {
  Tensor x = ones({2}).requires_grad_();
  Tensor unused = ones({2}).requires_grad_();
  Tensor y = sum(mul(x, 3.0));
  CHECK_THROWS_WITH(grad({y}, {x, unused}, {}, /*retain_graph=*/true),
                    Catch::Contains("inputs[1]") && Catch::Contains("allow_unused"));
  TensorList g = grad({y}, {x, unused}, {}, false, false, /*allow_unused=*/true);
  CHECK(g[0].to_vector<float>() == std::vector<float>{3, 3});
  CHECK_FALSE(g[1].defined());
  CHECK_FALSE(x.grad().defined());  // grad() does not accumulate into .grad
}

TEST_CASE("a saved tensor modified in place", "[engine][errors][version]") {
  Tensor x = ones({3}).requires_grad_();
  Tensor a = mul(x, 2.0);
  Tensor b = mul(a, a);  // saves a
  a.set_name("a");
  {
    NoGradGuard g;
    kernels::fill(current_stream(a.device()), a.view(), 5);
    a.bump_version();  // what every in-place op does
  }
  CHECK_THROWS_WITH(sum(b).backward(),
                    Catch::Contains("MulBackward") && Catch::Contains("\"a\"") &&
                        Catch::Contains("is at version 1") &&
                        Catch::Contains("expected version 0"));
}

TEST_CASE("ops mixing devices", "[engine][errors]") {
  Tensor a = ones({2}, TensorOptions().device("sim:0"));
  Tensor b = ones({2}, TensorOptions().device("sim:1"));
  CHECK_THROWS_AS(add(a, b), DeviceError);
  CHECK_THROWS_WITH(mul(a, b), Catch::Contains("sim:0") && Catch::Contains("sim:1"));
}

TEST_CASE("requires_grad on an int64 tensor", "[engine][errors]") {
  Tensor i = zeros({3}, TensorOptions().dtype(DType::kInt64));
  CHECK_THROWS_WITH(i.requires_grad_(), Catch::Contains("int64") && Catch::Contains("floating"));
  CHECK_THROWS_AS(zeros({3}, TensorOptions().dtype(DType::kInt64).requires_grad(true)),
                  ValueError);
  CHECK_FALSE(i.requires_grad());
}

TEST_CASE("a hook that returns a tensor of the wrong shape", "[engine][errors][hooks]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  Tensor x = ones({3}, TensorOptions().device(d)).requires_grad_();
  Tensor y = mul(x, 2.0);
  y.register_hook([](const Tensor& g) { return ones({4}, TensorOptions().device(g.device())); });
  CHECK_THROWS_WITH(sum(y).backward(), Catch::Contains("hook") &&
                                           Catch::Contains("float32[4]") &&
                                           Catch::Contains("float32[3]"));
  Tensor leaf = ones({2}, TensorOptions().device(d)).requires_grad_();
  leaf.register_hook([](const Tensor& g) { return ones({1}, TensorOptions().device(g.device())); });
  CHECK_THROWS_WITH(sum(mul(leaf, 1.0)).backward(), Catch::Contains("hook"));
}

struct Faulty : Function<Faulty> {
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {clone(in[0])}; }
  static TensorList backward(FunctionCtx&, const TensorList&) {
    throw ValueError("my backward failed on purpose");
  }
};

TEST_CASE("an exception inside a custom backward reaches the caller", "[engine][errors]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"), Device("sim:1"));
  Tensor x = ones({2}, TensorOptions().device(d)).requires_grad_();
  Tensor y = sum(mul(Faulty::apply({x}, "Faulty")[0], 3.0));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("FaultyBackward") &&
                                      Catch::Contains("my backward failed on purpose"));
  // The engine still works, on the same device and worker.
  Tensor z = sum(mul(x, 3.0));
  z.backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("backward of a tensor that does not require grad", "[engine][errors]") {
  Tensor x = ones({1});
  CHECK_THROWS_WITH(x.backward(), Catch::Contains("does not require grad"));
  Tensor y;
  {
    NoGradGuard g;
    y = mul(ones({1}).requires_grad_(), 2.0);
  }
  CHECK_FALSE(y.requires_grad());
  CHECK_THROWS_AS(y.backward(), Error);
}

}  // namespace
}  // namespace streamgrad

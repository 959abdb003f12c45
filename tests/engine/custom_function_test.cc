// Custom functions as users of the reference framework write them: mark_dirty,
// mark_non_differentiable, set_materialize_grads, once-differentiable backward, and saving
// an output without leaking the graph (test_autograd.py's Function tests, as behaviours).
#include <catch2/catch.hpp>

#include <memory>

#include "tests/device_names.h"
#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

// cpu, sim:0, and cuda:0 where a GPU is present (tests/device_names.h).
std::vector<Device> test_devices() {
  std::vector<Device> out;
  for (const std::string& name : testing::device_names()) out.emplace_back(name);
  return out;
}

// Doubles its input in place and returns it.
struct DoubleInPlace : Function<DoubleInPlace> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    Tensor x = in[0];
    mul_(x, 2.0);
    ctx.mark_dirty({x});
    return {x};
  }
  static TensorList backward(FunctionCtx&, const TensorList& g) { return {mul(g[0], 2.0)}; }
};

// Reference: "test_mark_dirty" style — the input modified in place is the output, gets the
// function as its grad_fn, its version moves, and gradients flow through it.
TEST_CASE("mark_dirty: the modified input becomes the output with the new history",
          "[engine][function]") {
  const Device d = GENERATE(from_range(test_devices()));
  Tensor x = full({2}, 3, TensorOptions().device(d)).requires_grad_();
  Tensor a = mul(x, 1.0);
  const uint32_t before = a.version();
  Tensor out = DoubleInPlace::apply({a}, "DoubleInPlace")[0];
  CHECK(out.is_same(a));
  CHECK(a.grad_fn()->name() == "DoubleInPlaceBackward");
  CHECK(a.version() > before);
  CHECK(a.to_vector<float>() == std::vector<float>{6, 6});
  sum(a).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 2});
}

TEST_CASE("mark_dirty on a leaf that requires grad is refused", "[engine][function]") {
  Tensor x = ones({2}).requires_grad_();
  CHECK_THAT(testing::error_of<ValueError>([&] { DoubleInPlace::apply({x}, "DoubleInPlace"); }),
             Catch::Contains("DoubleInPlace") && Catch::Contains("leaf"));
}

struct DirtyNotReturned : Function<DirtyNotReturned> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.mark_dirty({in[0]});
    return {clone(in[0])};
  }
  static TensorList backward(FunctionCtx&, const TensorList& g) { return {g[0]}; }
};

TEST_CASE("a tensor marked dirty must be returned", "[engine][function]") {
  Tensor x = ones({2}).requires_grad_();
  CHECK_THAT(testing::error_of<ValueError>(
                 [&] { DirtyNotReturned::apply({mul(x, 1.0)}, "DirtyNotReturned"); }),
             Catch::Contains("not returned"));
}

// Returns (value, an int64 index, a float mask marked non-differentiable).
struct WithIndex : Function<WithIndex> {
  static inline int* seen_grads = nullptr;
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    Tensor mask = ones_like(in[0]);
    ctx.mark_non_differentiable({mask});
    return {mul(in[0], 2.0), zeros({1}, TensorOptions().dtype(DType::kInt64)), mask};
  }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    *seen_grads = static_cast<int>(g.size());
    return {mul(g[0], 2.0)};
  }
};

// Reference: non-differentiable outputs do not require grad, and backward still receives
// one gradient per output.
TEST_CASE("mark_non_differentiable: outputs without grad, one gradient per output",
          "[engine][function]") {
  int seen = 0;
  WithIndex::seen_grads = &seen;
  Tensor x = ones({2}).requires_grad_();
  TensorList out = WithIndex::apply({x}, "WithIndex");
  CHECK(out[0].requires_grad());
  CHECK(!out[1].requires_grad());
  CHECK(!out[2].requires_grad());
  sum(out[0]).backward();
  CHECK(seen == 3);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 2});
}

struct SeesUndefined : Function<SeesUndefined> {
  static inline bool* second_undefined = nullptr;
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.set_materialize_grads(false);
    return {clone(in[0]), clone(in[0])};
  }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    *second_undefined = !g[1].defined();
    return {g[0]};
  }
};

// Reference: "test_set_materialize_grads" — with materialisation off, outputs that got no
// gradient arrive undefined instead of as zeros.
TEST_CASE("set_materialize_grads(false) passes absent gradients as undefined",
          "[engine][function]") {
  bool undefined = false;
  SeesUndefined::second_undefined = &undefined;
  Tensor x = ones({2}).requires_grad_();
  sum(SeesUndefined::apply({x}, "SeesUndefined")[0]).backward();
  CHECK(undefined);
}

struct OnceCube : OnceDifferentiableFunction<OnceCube> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    return {mul(mul(in[0], in[0]), in[0])};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    Tensor x = ctx.saved_tensors()[0];
    return {mul(g[0], mul(mul(x, x), 3.0))};
  }
};

// Reference: once_differentiable — first-order gradients are right; differentiating them
// again is a clear error rather than a silent zero.
TEST_CASE("a once-differentiable function refuses double backward", "[engine][function]") {
  const Device d = GENERATE(from_range(test_devices()));
  Tensor x = full({2}, 2, TensorOptions().device(d)).requires_grad_();
  TensorList g = grad({sum(OnceCube::apply({x}, "OnceCube")[0])}, {x}, {}, false,
                      /*create_graph=*/true);
  CHECK(g[0].to_vector<float>() == std::vector<float>{12, 12});
  REQUIRE(g[0].requires_grad());
  CHECK_THAT(testing::error_of<Error>([&] { sum(g[0]).backward(); }),
             Catch::Contains("OnceCube") && Catch::Contains("once-differentiable"));
  // Without create_graph it is an ordinary function.
  Tensor y = full({2}, 2, TensorOptions().device(d)).requires_grad_();
  sum(OnceCube::apply({y}, "OnceCube")[0]).backward();
  CHECK(y.grad().to_vector<float>() == std::vector<float>{12, 12});
}

// exp(x) whose backward uses the saved output.
struct ExpSavesOutput : Function<ExpSavesOutput> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    Tensor out = exp(in[0]);
    ctx.save_for_backward({out});
    return {out};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    return {mul(g[0], ctx.saved_tensors()[0])};
  }
};

// Reference: saving an output for backward does not keep the graph alive forever (the
// saved variable holds its own node weakly), and the saved output still differentiates.
TEST_CASE("a function that saves its own output does not leak its graph",
          "[engine][function][memory]") {
  std::weak_ptr<Node> node;
  {
    Tensor x = zeros({2}).requires_grad_();
    Tensor y = ExpSavesOutput::apply({x}, "ExpSavesOutput")[0];
    node = y.grad_fn();
    // Second order through the saved output: d2/dx2 exp(x) = exp(x) = 1 at 0.
    TensorList g = grad({sum(y)}, {x}, {}, false, /*create_graph=*/true);
    CHECK(g[0].to_vector<float>() == std::vector<float>{1, 1});
    sum(g[0]).backward();
    CHECK(x.grad().to_vector<float>() == std::vector<float>{1, 1});
  }
  CHECK(node.expired());
}

}  // namespace
}  // namespace streamgrad

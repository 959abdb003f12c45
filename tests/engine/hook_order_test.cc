// Hooks, accumulation order and custom-function results as in the reference framework
// (issue 24 items 2-7): hooks see undefined gradients, accumulators run first, a tensor
// hook may differentiate through its own node, extra undefined gradients are dropped, the
// version error names the node that moved the tensor on, and create_graph backward into
// leaves warns about the reference cycle.
#include <catch2/catch.hpp>

#include "runtime/base/warning.h"
#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

using testing::error_of;

// Returns no gradient for its second input.
struct HalfBackward : Function<HalfBackward> {
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {add(in[0], in[1])}; }
  static TensorList backward(FunctionCtx&, const TensorList& g) { return {g[0], Tensor()}; }
};

TEST_CASE("leaf and non-leaf hooks see an undefined gradient", "[engine][hooks]") {
  Tensor x = ones({2}).requires_grad_();
  Tensor w = ones({2}).requires_grad_();
  int leaf_calls = 0, leaf_undefined = 0, post_calls = 0, nonleaf_undefined = 0;
  w.register_hook([&](const Tensor& g) {
    ++leaf_calls;
    if (!g.defined()) ++leaf_undefined;
    return Tensor();
  });
  w.register_post_accumulate_grad_hook([&](const Tensor&) { ++post_calls; });
  Tensor mid = mul(w, 2.0);
  mid.register_hook([&](const Tensor& g) {
    if (!g.defined()) ++nonleaf_undefined;
    return Tensor();
  });
  Tensor y = HalfBackward::apply({x, mid})[0];
  sum(y).backward();
  CHECK(leaf_calls == 1);
  CHECK(leaf_undefined == 1);
  CHECK(post_calls == 1);
  CHECK(nonleaf_undefined == 1);
  CHECK_FALSE(w.grad().defined());
  CHECK(x.grad().to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("accumulators run before other ready nodes", "[engine][order]") {
  Tensor w = ones({3}).requires_grad_();
  Tensor x = ones({3}).requires_grad_();
  const Tensor keep = mul(w, 2.0);  // w's accumulator is created (and kept) first
  std::vector<std::string> order;
  w.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w"); });
  Tensor chain = mul(x, 1.0);
  for (int i = 0; i < 5; ++i) {
    chain = mul(chain, 1.0);
    chain.register_hook([&order, i](const Tensor&) {
      order.push_back("chain" + std::to_string(i));
      return Tensor();
    });
  }
  Tensor loss = add(sum(chain), sum(mul(w, 3.0)));
  loss.backward();
  REQUIRE(order.size() == 6);
  // w's gradient is ready after one step of each branch: it accumulates then, not after
  // the whole chain.
  CHECK(std::find(order.begin(), order.end(), "w") - order.begin() <= 1);
}

TEST_CASE("a tensor hook may differentiate through its tensor's own node", "[engine][hooks]") {
  Tensor x = from_vector<float>({0.5, 1.0}).requires_grad_();
  Tensor y = exp(x);
  Tensor inner;
  const Tensor s = sum(y);
  bool inside = false;  // the nested backward passes through this hook too
  y.register_hook([&](const Tensor&) {
    if (inside) return Tensor();
    inside = true;
    inner = grad({s}, {x}, {}, /*retain_graph=*/true)[0];
    inside = false;
    return Tensor();
  });
  s.backward(Tensor(), /*retain_graph=*/true);
  REQUIRE(inner.defined());
  CHECK(inner.to_vector<float>() == exp(x).detach().to_vector<float>());
}

struct ExtraGrads : Function<ExtraGrads> {
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {mul(in[0], 3.0)}; }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    if (ctx.saved_data.count("defined")) return {mul(g[0], 3.0), g[0]};
    return {mul(g[0], 3.0), Tensor(), Tensor()};
  }
};

TEST_CASE("a custom backward's extra undefined gradients are dropped", "[engine][function]") {
  Tensor x = ones({2}).requires_grad_();
  sum(ExtraGrads::apply({x})[0]).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("the version error names the node that produced the tensor's value",
          "[engine][version]") {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = mul(x, 1.0);
  Tensor z = mul(y, y);  // saves y
  add_(y, ones({2}));
  const std::string msg = error_of<Error>([&] { sum(z).backward(); });
  CHECK_THAT(msg, Catch::Contains("which is output 0 of Add_Backward"));
  CHECK_THAT(msg, Catch::Contains("is at version 1; expected version 0"));
}

TEST_CASE("backward with create_graph into leaves warns about the reference cycle",
          "[engine][warnings]") {
  Tensor x = ones({2}).requires_grad_();
  {
    WarningCollector collect;
    sum(mul(x, x)).backward(Tensor(), false, /*create_graph=*/true);
    REQUIRE(collect.warnings().size() == 1);
    CHECK_THAT(collect.warnings()[0].message, Catch::Contains("reference cycle"));
  }
  {
    WarningCollector collect;  // grad() writes no .grad: no cycle, no warning
    grad({sum(mul(x, x))}, {x}, {}, false, true);
    CHECK(collect.warnings().empty());
  }
  x.set_grad(Tensor());
}

}  // namespace
}  // namespace streamgrad

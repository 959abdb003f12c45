// After a backward without retain_graph the saved tensors are freed, and once the outputs
// are dropped memory returns to its pre-forward level.
#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

const Device kDev("sim:1");

int64_t allocated() {
  synchronize(kDev);
  return memory_stats(kDev).allocated_bytes.current;
}

TEST_CASE("saved tensors are freed by backward; the graph by dropping outputs",
          "[engine][memory]") {
  Tensor x = randn({64, 64}, TensorOptions().device(kDev)).requires_grad_();
  x.set_grad(zeros({64, 64}, TensorOptions().device(kDev)));
  const int64_t before = allocated();
  int64_t after_forward = 0, after_backward = 0;
  {
    Tensor a = mul(x, x);       // saves x (held anyway)
    Tensor b = mul(a, a);       // saves a
    Tensor c = div(b, add(a, 1.0));  // saves b and a + 1
    Tensor loss = sum(c);
    a = Tensor();
    b = Tensor();
    c = Tensor();
    after_forward = allocated();
    loss.backward();
    after_backward = allocated();
  }
  CHECK(after_forward > before);
  CHECK(after_backward < after_forward);  // saved a, b, a+1 released during backward
  CHECK(allocated() == before);            // nothing left once the loss is dropped
}

TEST_CASE("retain_graph keeps saved tensors until the graph is dropped", "[engine][memory]") {
  Tensor x = randn({32}, TensorOptions().device(kDev)).requires_grad_();
  x.set_grad(zeros({32}, TensorOptions().device(kDev)));
  const int64_t before = allocated();
  {
    Tensor loss = sum(mul(mul(x, 2.0), mul(x, 3.0)));
    const int64_t held = allocated();
    loss.backward(Tensor(), /*retain_graph=*/true);
    CHECK(allocated() == held);
    loss.backward();
  }
  CHECK(allocated() == before);
}

// Reference: the engine's input buffer adds a gradient into the one it holds in place
// when nothing else can see it, so a K-way fan-in allocates no sums.
TEST_CASE("fan-in gradients accumulate in place: K branches, no K sums",
          "[engine][memory][fanin]") {
  const Device d = GENERATE(Device("cpu"), kDev);
  const int k = 64;
  Tensor x = randn({8}, TensorOptions().device(d)).requires_grad_();
  std::vector<Tensor> branches;
  for (int i = 0; i < k; ++i) branches.push_back(mul(x, 1.0 + i));
  Tensor loss = sum(stack(branches, 0));
  branches.clear();
  synchronize(d);
  const int64_t allocs_before = memory_stats(d).num_allocs;
  loss.backward();
  synchronize(d);
  const int64_t allocs = memory_stats(d).num_allocs - allocs_before;
  // One gradient per branch, plus a few for sum, stack and the leaf; out-of-place sums
  // would add k - 1 more.
  CHECK(allocs < k + k / 2);
  const double expected = k * (k + 1) / 2.0;  // sum of the branch factors 1..k
  for (float v : x.grad().to_vector<float>()) CHECK(v == Approx(expected));
}

// A gradient someone else still holds must never be written: here custom backwards
// return tensors they also keep.
struct KeepsGrad : Function<KeepsGrad> {
  static inline std::vector<Tensor>* kept = nullptr;
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {clone(in[0])}; }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    kept->push_back(mul(g[0], 2.0));
    return {kept->back()};
  }
};

TEST_CASE("in-place accumulation never writes a gradient held elsewhere",
          "[engine][memory][fanin]") {
  const Device d = GENERATE(Device("cpu"), kDev);
  std::vector<Tensor> kept;
  KeepsGrad::kept = &kept;
  Tensor x = ones({4}, TensorOptions().device(d)).requires_grad_();
  // Two held gradients meet in x's buffer, alone or with a free one in either order.
  const int free_branch = GENERATE(0, 1, 2);  // none, after, before
  Tensor a = add(KeepsGrad::apply({x}, "KeepsGrad")[0], KeepsGrad::apply({x}, "KeepsGrad")[0]);
  Tensor b = mul(x, 3.0);
  Tensor loss = free_branch == 0 ? sum(a) : free_branch == 1 ? sum(add(a, b)) : sum(add(b, a));
  loss.backward();
  REQUIRE(kept.size() == 2);
  for (const Tensor& k : kept) CHECK(k.to_vector<float>() == std::vector<float>(4, 2.0f));
  CHECK(x.grad().to_vector<float>() == std::vector<float>(4, free_branch == 0 ? 4.0f : 7.0f));
  KeepsGrad::kept = nullptr;
}

TEST_CASE("under create_graph fan-in sums stay differentiable", "[engine][memory][fanin]") {
  // d/dx (3x + x^2) = 3 + 2x: a constant and a differentiable gradient meet at x.
  const bool constant_first = GENERATE(true, false);
  Tensor x = full({3}, 2.0f).requires_grad_();
  Tensor y = constant_first ? add(mul(x, 3.0), mul(x, x)) : add(mul(x, x), mul(x, 3.0));
  Tensor gx = grad({sum(y)}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  REQUIRE(gx.requires_grad());
  CHECK(gx.to_vector<float>() == std::vector<float>(3, 7.0f));
  Tensor ggx = grad({sum(gx)}, {x})[0];
  CHECK(ggx.to_vector<float>() == std::vector<float>(3, 2.0f));
}

}  // namespace
}  // namespace streamgrad

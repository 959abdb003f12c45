// Deep and wide graphs: destruction, backward and nested backward never recurse on the
// stack (issue 9, defect 1). Ported behaviours of the reference framework: a very long
// chain dropped without backward is freed without a stack overflow; a graph kept alive
// through .grad under create_graph is freed too; nested (reentrant) backward survives
// thousands of levels because deep nesting is handed to fresh threads.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>

#include "bench/deep_graphs.h"
#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

using testing::adversarial;

// Deep enough to overflow an 8 MiB stack with recursive destruction (each level is
// several frames, larger still under the sanitizers, which therefore get shorter chains).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kScale = 4;
#else
constexpr int kScale = 1;
#endif
constexpr int kDeep = 100000 / kScale;

TEST_CASE("a long chain dropped without backward is freed iteratively", "[engine][deep]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  Tensor x = ones({1}, TensorOptions().device(d)).requires_grad_();
  std::weak_ptr<Node> first;
  {
    Tensor y = bench::mul_chain(x, kDeep);
    Node* n = y.grad_fn().get();
    for (int i = 0; i < kDeep - 1; ++i) n = n->next_edge(0).function.get();
    first = n->shared_from_this();
    CHECK(first.lock()->name() == "MulBackward");
  }  // y goes: the whole chain goes with it
  CHECK(first.expired());
}

TEST_CASE("a long chain runs backward and is freed afterwards", "[engine][deep]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  Tensor x = full({1}, 3, TensorOptions().device(d)).requires_grad_();
  Tensor y = bench::mul_chain(x, kDeep);
  sum(y).backward();
  CHECK(x.grad().item<float>() == 1.0f);
  y = Tensor();  // release_variables already ran; the nodes themselves go now
}

TEST_CASE("a wide fan-in graph is freed and differentiated", "[engine][deep]") {
  Tensor x = ones({1}).requires_grad_();
  std::vector<Tensor> parts;
  for (int i = 0; i < 20000; ++i) parts.push_back(mul(x, 2.0));
  Tensor total = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) total = add(total, parts[i]);
  parts.clear();
  total.backward();
  CHECK(x.grad().item<float>() == 40000.0f);
}

TEST_CASE("a graph kept alive through .grad under create_graph is freed", "[engine][deep]") {
  // The reference framework warns that .grad with create_graph keeps the backward graph
  // alive through the leaf; dropping the grad must free it without recursion.
  Tensor x = ones({1}).requires_grad_();
  Tensor y = bench::mul_chain(x, 50000 / kScale);
  sum(mul(y, y)).backward({}, false, /*create_graph=*/true);
  Tensor g = x.grad();
  REQUIRE(g.grad_fn() != nullptr);
  std::weak_ptr<Node> g_fn = g.grad_fn();
  y = Tensor();
  g = Tensor();
  x.set_grad(Tensor());
  CHECK(g_fn.expired());
}

TEST_CASE("nested backward survives depth 10,000", "[engine][deep][reentrant]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  // On sim every level also crosses to the device worker; the sanitizer builds check
  // that path at a smaller depth and the full depth on cpu.
  const float depth = d.is_cpu() ? 10000 : 10000 / kScale;
  Tensor x = full({1}, depth, TensorOptions().device(d)).requires_grad_();
  sum(bench::NestedBackward::apply({x}, "Nested")[0]).backward();
  CHECK(x.grad().item<float>() == 1.0f);
}

}  // namespace
}  // namespace streamgrad

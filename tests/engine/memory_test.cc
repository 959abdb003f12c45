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

}  // namespace
}  // namespace streamgrad

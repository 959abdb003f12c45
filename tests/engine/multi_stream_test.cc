// The same program on one stream, forked onto two streams and joined, and moved between
// sim:0 and sim:1 and back gives the same gradients bit for bit — under the adversarial
// scheduler for many seeds and under the threaded scheduler with jitter.
#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

using testing::adversarial;
using testing::side_stream;
using testing::threaded_jitter;

struct Grads {
  std::vector<float> x, w1, w2;
  bool operator==(const Grads& o) const { return x == o.x && w1 == o.w1 && w2 == o.w2; }
};

struct Inputs {
  std::vector<float> x, w1, w2;
};

Inputs make_inputs() {
  manual_seed(11);
  Inputs in;
  in.x = randn({4, 5}).to_vector<float>();
  in.w1 = randn({5, 3}).to_vector<float>();
  in.w2 = randn({3, 3}).to_vector<float>();
  return in;
}

enum class Layout { kOneStream, kForkJoin, kAcrossDevices };

Grads run(const Inputs& in, Layout layout) {
  const TensorOptions o = TensorOptions().device("sim:0");
  Tensor x = from_vector<float>(in.x, {4, 5}, o).requires_grad_();
  Tensor w1 = from_vector<float>(in.w1, {5, 3}, o).requires_grad_();
  Tensor w2 = from_vector<float>(in.w2, {3, 3}, o).requires_grad_();
  const Stream main = current_stream("sim:0");
  Tensor a = matmul(x, w1);
  Tensor b1, b2;
  if (layout == Layout::kForkJoin) {
    const Stream s1 = side_stream(0, 0), s2 = side_stream(0, 1);
    s1.wait_stream(main);
    s2.wait_stream(main);
    {
      StreamGuard g(s1);
      b1 = tanh(a);
    }
    {
      StreamGuard g(s2);
      b2 = matmul(exp(mul(a, 0.1)), w2);
    }
    main.wait_stream(s1);
    main.wait_stream(s2);
    a.storage().record_stream(s1);  // a and w2 were read on the side streams (S8)
    a.storage().record_stream(s2);
    w2.storage().record_stream(s2);
  } else if (layout == Layout::kAcrossDevices) {
    Tensor a1 = to(a, "sim:1");
    Tensor w21 = to(w2, "sim:1");
    b1 = to(tanh(a1), "sim:0");
    b2 = to(matmul(exp(mul(a1, 0.1)), w21), "sim:0");
  } else {
    b1 = tanh(a);
    b2 = matmul(exp(mul(a, 0.1)), w2);
  }
  Tensor loss = sum(mul(b1, b2));
  loss.backward();
  return Grads{x.grad().to_vector<float>(), w1.grad().to_vector<float>(),
               w2.grad().to_vector<float>()};
}

TEST_CASE("fork-join and cross-device programs match one stream bit for bit",
          "[engine][multistream][S4][S7]") {
  const Inputs in = make_inputs();
  const Grads reference = run(in, Layout::kOneStream);
  REQUIRE(reference.x.size() == 20);
  const Layout layout = GENERATE(Layout::kForkJoin, Layout::kAcrossDevices);
  INFO((layout == Layout::kForkJoin ? "fork-join on two streams" : "sim:0 -> sim:1 -> sim:0"));
  int wrong = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SimSchedulerScope scope(adversarial(seed));
    wrong += !(run(in, layout) == reference);
  }
  CHECK(wrong == 0);
  SimSchedulerScope scope(threaded_jitter(9, 10));
  for (int r = 0; r < 200; ++r) wrong += !(run(in, layout) == reference);
  CHECK(wrong == 0);
}

}  // namespace
}  // namespace streamgrad

// One gradient tensor handed to several consumers on different streams (AddBackward and
// Add_Backward give both inputs the same tensor) is never written in place while another
// stream may still read it: each leaf gets its own gradient, under the adversarial
// scheduler for many seeds and under the threaded scheduler with jitter.
#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

using testing::adversarial;
using testing::f64;
using testing::side_stream;
using testing::threaded_jitter;

struct Grads {
  std::vector<double> l0, l2;
};

// L0 is created on one side stream and L2 on another, so their accumulators run on
// different streams; both are reached through one shared gradient tensor.
Grads run(Device d, bool inplace) {
  manual_seed(5);
  const std::vector<double> v0 = randn({3, 2, 2}, f64()).to_vector<double>();
  const std::vector<double> v2 = randn({3, 2, 2}, f64()).to_vector<double>();
  const std::vector<double> vc2 = randn({3, 2, 2}, f64()).to_vector<double>();
  const std::vector<double> vc3 = randn({3, 2, 2}, f64()).to_vector<double>();
  Tensor l0, l2;
  const bool sim = d.type() == DeviceType::kSim;
  {
    std::optional<StreamGuard> g;
    if (sim) g.emplace(side_stream(0, 1));
    l0 = from_vector<double>(v0, {3, 2, 2}, f64(d)).requires_grad_();
  }
  {
    std::optional<StreamGuard> g;
    if (sim) g.emplace(side_stream(0, 0));
    l2 = from_vector<double>(v2, {3, 2, 2}, f64(d)).requires_grad_();
  }
  if (sim) {
    current_stream(d).wait_stream(side_stream(0, 0));
    current_stream(d).wait_stream(side_stream(0, 1));
  }
  const Tensor c2 = from_vector<double>(vc2, {3, 2, 2}, f64(d));
  const Tensor c3 = from_vector<double>(vc3, {3, 2, 2}, f64(d));
  Tensor t1 = softmax(l0, 0);
  Tensor t5 = clone(l0);
  if (inplace) {
    add_(t5, l2);
  } else {
    t5 = add(t5, l2);
  }
  Tensor loss = add(sum(mul(t5, c2)), sum(mul(t1, c3)));
  loss.backward();
  return {l0.grad().to_vector<double>(), l2.grad().to_vector<double>()};
}

TEST_CASE("a gradient shared by two consumers on different streams is not written in place "
          "under a pending read",
          "[engine][streams]") {
  for (const bool inplace : {true, false}) {
    const Grads want = run(Device("cpu"), inplace);
    for (uint64_t seed = 0; seed < 20; ++seed) {
      SimSchedulerScope scope(adversarial(seed));
      const Grads got = run(Device("sim:0"), inplace);
      INFO("seed " << seed << (inplace ? " add_" : " add"));
      CHECK(got.l2 == want.l2);
      CHECK(got.l0 == want.l0);
    }
    for (uint64_t seed = 0; seed < 10; ++seed) {
      SimSchedulerScope scope(threaded_jitter(seed));
      const Grads got = run(Device("sim:0"), inplace);
      CHECK(got.l2 == want.l2);
      CHECK(got.l0 == want.l0);
    }
  }
}

}  // namespace
}  // namespace streamgrad

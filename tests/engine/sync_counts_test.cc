// What a backward costs in synchronisation and copies (issue 11): a single-stream graph
// with fan-out and fan-in records no event and issues no wait (runtime/backend/event.h counters;
// forked graphs: backward_sync_counts_test); AccumulateGrad takes the incoming gradient
// without a copy when nothing else holds it.
// Run under the deterministic adversarial scheduler, so the counts and values are the same
// on every run.
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

using testing::adversarial;

// The names of the launches made while it lives.
class LaunchNames : public LaunchObserver {
 public:
  LaunchNames() { add_launch_observer(this); }
  ~LaunchNames() override { remove_launch_observer(this); }
  void on_launch(const Stream&, const LaunchDesc& d) override {
    std::lock_guard<std::mutex> lk(mu_);
    names_.emplace_back(d.name);
  }
  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lk(mu_);
    return names_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> names_;
};

TEST_CASE("a single-stream backward records no event and issues no wait", "[engine][sync]") {
  SimSchedulerScope scope(adversarial(3));
  Tensor x = ones({8}, TensorOptions().device("sim:0")).requires_grad_();
  Tensor w = full({8}, 3.0, TensorOptions().device("sim:0")).requires_grad_();
  // Fan-out, fan-in and a leaf reached twice, all on the default stream.
  Tensor h = mul(add(x, 1.0), w);
  Tensor y = sum(add(mul(h, 2.0), mul(h, x)));
  const uint64_t events = events_recorded(), waits = stream_waits_issued();
  y.backward();
  CHECK(events_recorded() == events);
  CHECK(stream_waits_issued() == waits);
  // dy/dx = 2w + h + x w = 6 + 6 + 3; dy/dw = (x + 1)(2 + x) = 6.
  CHECK(x.grad().to_vector<float>()[0] == 15.0f);
  CHECK(w.grad().to_vector<float>()[0] == 6.0f);
}

TEST_CASE("AccumulateGrad takes a gradient nothing else holds without copying it",
          "[engine][accumulate]") {
  const Device dev = GENERATE(Device("cpu"), Device("sim:0"));
  INFO(dev.str());
  Tensor x = ones({16}, TensorOptions().device(dev)).requires_grad_();
  Tensor loss = sum(mul(x, 3.0));  // MulBackward makes a fresh gradient for x
  LaunchNames launches;
  loss.backward();
  for (const std::string& name : launches.names()) CHECK(name != "copy");
  CHECK(x.grad().to_vector<float>() == std::vector<float>(16, 3.0f));

  // A gradient that is a view (here a transposed one) is copied.
  Tensor z = ones({2, 8}, TensorOptions().device(dev)).requires_grad_();
  LaunchNames second;
  sum(transpose(z, 0, 1)).backward();
  bool copied = false;
  for (const std::string& name : second.names()) copied = copied || name == "copy";
  CHECK(copied);
}

}  // namespace
}  // namespace streamgrad

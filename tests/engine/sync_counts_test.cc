// What a backward costs in synchronisation and copies (issue 11): events recorded and
// device-side waits issued (runtime/event.h counters) are 0 on a single-stream graph and
// at most one each per cross-stream edge on a forked graph; AccumulateGrad takes the
// incoming gradient without a copy when nothing else holds it.
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
using testing::side_stream;

struct SyncCounts {
  uint64_t events = 0, waits = 0;
};

// Counts from construction to now().
class SyncCounter {
 public:
  SyncCounter() : events_(events_recorded()), waits_(stream_waits_issued()) {}
  SyncCounts now() const {
    return {events_recorded() - events_, stream_waits_issued() - waits_};
  }

 private:
  uint64_t events_, waits_;
};

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
  const SyncCounter counter;
  y.backward();
  CHECK(counter.now().events == 0);
  CHECK(counter.now().waits == 0);
  // dy/dx = 2w + h + x w = 6 + 6 + 3; dy/dw = (x + 1)(2 + x) = 6.
  CHECK(x.grad().to_vector<float>()[0] == 15.0f);
  CHECK(w.grad().to_vector<float>()[0] == 6.0f);
}

// x on the default stream D feeds a branch on P1 and one on P2; D joins them. The backward
// graph has four cross-stream edges: Add(D) -> Mul(P1), Add(D) -> Mul(P2), and each Mul
// -> AccumulateGrad(x) on D.
TEST_CASE("a forked backward synchronises at most once per cross-stream edge",
          "[engine][sync]") {
  const uint64_t seed = GENERATE(0, 1, 2, 3);
  SimSchedulerScope scope(adversarial(seed));
  const Stream p1 = side_stream(0, 0), p2 = side_stream(0, 1);
  const Stream d = current_stream("sim:0");
  Tensor x = ones({4}, TensorOptions().device("sim:0")).requires_grad_();
  Tensor y1, y2;
  p1.wait_stream(d);
  p2.wait_stream(d);
  {
    StreamGuard g(p1);
    y1 = mul(x, 2.0);
  }
  {
    StreamGuard g(p2);
    y2 = mul(x, 3.0);
  }
  d.wait_stream(p1);
  d.wait_stream(p2);
  y1.storage().record_stream(d);
  y2.storage().record_stream(d);
  Tensor loss = sum(add(y1, y2));
  const int cross_stream_edges = 4;
  const SyncCounter counter;
  loss.backward();
  const SyncCounts got = counter.now();
  INFO("events " << got.events << ", waits " << got.waits);
  CHECK(got.events <= cross_stream_edges);
  CHECK(got.waits <= cross_stream_edges);
  CHECK(got.events > 0);  // the edges do need ordering
  CHECK(x.grad().to_vector<float>() == std::vector<float>(4, 5.0f));
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

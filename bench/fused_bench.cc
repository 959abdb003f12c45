// Issue 11's "fewer nodes, kernels and events": the cost of one event record + wait on a
// sim device (pooled backend events), of a backward through a forked two-stream graph,
// of stack (one launch and one node for K inputs) and of an optimiser step with the
// foreach path (one launch per device and dtype) against the per-tensor path. Run with
//   OPENBLAS_NUM_THREADS=1 bazel run -c opt //bench:fused_bench
// Counters: events_created per iteration (backend event objects made: 0 once the pool is
// warm), launches per iteration.
#include <benchmark/benchmark.h>

#include <atomic>
#include <string>
#include <vector>

#include "streamgrad.h"

namespace {
using namespace streamgrad;

class LaunchCount : public LaunchObserver {
 public:
  LaunchCount() { add_launch_observer(this); }
  ~LaunchCount() override { remove_launch_observer(this); }
  void on_launch(const Stream&, const LaunchDesc& d) override {
    if (d.kind == LaunchKind::kKernel) n.fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<int64_t> n{0};
};

void BM_EventRecordBlockSim(benchmark::State& state) {
  const Stream a = Stream::create("sim:0"), b = Stream::create("sim:0");
  const uint64_t created = backend_events_created();
  int64_t i = 0;
  for (auto _ : state) {
    Event e;
    e.record(a);
    e.block(b);
    if (++i % 1024 == 0) {  // keeps the queues short; rare enough not to dominate
      state.PauseTiming();
      b.synchronize();
      state.ResumeTiming();
    }
  }
  b.synchronize();
  state.counters["events_created"] = benchmark::Counter(
      static_cast<double>(backend_events_created() - created), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_EventRecordBlockSim)->UseRealTime();

// x on the default stream feeds a branch on each of two side streams; the default
// stream joins them: four cross-stream edges in backward.
void BM_ForkedBackwardSim(benchmark::State& state) {
  const Device dev("sim:0");
  const Stream p1 = Stream::create(dev), p2 = Stream::create(dev);
  const Stream d = current_stream(dev);
  const int64_t n = state.range(0);
  Tensor x = ones({n}, TensorOptions().device(dev)).requires_grad_();
  const uint64_t created = backend_events_created();
  for (auto _ : state) {
    state.PauseTiming();
    p1.wait_stream(d);
    p2.wait_stream(d);
    Tensor y1, y2;
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
    x.set_grad(Tensor());
    state.ResumeTiming();
    loss.backward();
    synchronize(dev);
  }
  state.counters["events_created"] = benchmark::Counter(
      static_cast<double>(backend_events_created() - created), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_ForkedBackwardSim)->Arg(16)->Unit(benchmark::kMicrosecond)->UseRealTime();

// stack of K [64] inputs, forward and backward, on cpu.
void BM_StackForwardBackwardCpu(benchmark::State& state) {
  const int64_t k = state.range(0);
  std::vector<Tensor> xs;
  for (int64_t i = 0; i < k; ++i) xs.push_back(ones({64}).requires_grad_());
  LaunchCount launches;
  for (auto _ : state) {
    Tensor loss = sum(mul(stack(xs, 1), 2.0));
    loss.backward();
    for (Tensor& x : xs) x.set_grad(Tensor());
  }
  state.counters["launches"] = benchmark::Counter(static_cast<double>(launches.n.load()),
                                                  benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_StackForwardBackwardCpu)->Arg(4)->Arg(64)->Unit(benchmark::kMicrosecond);

// One optimiser step over `count` parameters of `numel` float32 elements each.
template <typename Make>
void optimizer_step(benchmark::State& state, Device dev, Make make) {
  const int64_t count = state.range(0), numel = state.range(1);
  std::vector<Tensor> params;
  for (int64_t i = 0; i < count; ++i) {
    Tensor p = ones({numel}, TensorOptions().device(dev)).requires_grad_();
    p.set_grad(full({numel}, 0.01, TensorOptions().device(dev)));
    params.push_back(p);
  }
  auto opt = make(params);
  opt->step();  // creates the state
  synchronize(dev);
  LaunchCount launches;
  for (auto _ : state) {
    opt->step();
    synchronize(dev);
  }
  state.counters["launches"] = benchmark::Counter(static_cast<double>(launches.n.load()),
                                                  benchmark::Counter::kAvgIterations);
}

void sgd(benchmark::State& state, Device dev, bool foreach) {
  optimizer_step(state, dev, [foreach](const std::vector<Tensor>& p) {
    return std::make_unique<nn::SGD>(
        p, nn::SGDOptions(0.01).momentum(0.9).weight_decay(1e-4).foreach(foreach));
  });
}
void adam(benchmark::State& state, Device dev, bool foreach) {
  optimizer_step(state, dev, [foreach](const std::vector<Tensor>& p) {
    return std::make_unique<nn::Adam>(p, nn::AdamOptions(1e-3).foreach(foreach));
  });
}

void BM_SgdForeachCpu(benchmark::State& s) { sgd(s, Device("cpu"), true); }
void BM_SgdPerTensorCpu(benchmark::State& s) { sgd(s, Device("cpu"), false); }
void BM_SgdForeachSim(benchmark::State& s) { sgd(s, Device("sim:0"), true); }
void BM_SgdPerTensorSim(benchmark::State& s) { sgd(s, Device("sim:0"), false); }
void BM_AdamForeachSim(benchmark::State& s) { adam(s, Device("sim:0"), true); }
void BM_AdamPerTensorSim(benchmark::State& s) { adam(s, Device("sim:0"), false); }

// 50 small parameters (launch-bound) and 4 large ones (bandwidth-bound).
#define SG_OPT_BENCH(fn) \
  BENCHMARK(fn)->Args({50, 256})->Args({4, 1 << 18})->Unit(benchmark::kMicrosecond)->UseRealTime()
SG_OPT_BENCH(BM_SgdForeachCpu);
SG_OPT_BENCH(BM_SgdPerTensorCpu);
SG_OPT_BENCH(BM_SgdForeachSim);
SG_OPT_BENCH(BM_SgdPerTensorSim);
SG_OPT_BENCH(BM_AdamForeachSim);
SG_OPT_BENCH(BM_AdamPerTensorSim);

}  // namespace

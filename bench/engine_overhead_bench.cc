// Engine overhead on the libtorch anchor's chain graphs (shared/reference/
// libtorch-cpu-anchor.md): n nodes of `y = y * 1.0001` (or `+ 1e-4`) on a 1-element cpu
// tensor, then sum(); reports backward time per node. Run with
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 bazel run -c opt //bench:engine_overhead_bench
// libtorch is not installed here, so the anchor's published figures are the comparison
// (not a same-run ratio); see bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include "streamgrad.h"

namespace {
using namespace streamgrad;

void chain(benchmark::State& state, bool add_op, Device device) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    state.PauseTiming();
    Tensor x = ones({1}, TensorOptions().device(device)).requires_grad_();
    Tensor y = x;
    for (int64_t i = 0; i < n; ++i) y = add_op ? add(y, 1e-4) : mul(y, 1.0001);
    Tensor loss = sum(y);
    y = Tensor();
    state.ResumeTiming();
    loss.backward();
    synchronize(device);
    state.PauseTiming();
    loss = Tensor();
    state.ResumeTiming();
  }
  // Seconds of backward per graph node (n ops + SumBackward + AccumulateGrad).
  state.counters["per_node"] = benchmark::Counter(
      static_cast<double>(n + 2),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_ChainMulCpu(benchmark::State& s) { chain(s, false, Device("cpu")); }
void BM_ChainAddCpu(benchmark::State& s) { chain(s, true, Device("cpu")); }
void BM_ChainMulSim(benchmark::State& s) { chain(s, false, Device("sim:0")); }

void BM_NoGradMulCpu(benchmark::State& state) {
  Tensor y = ones({1});
  NoGradGuard g;
  for (auto _ : state) benchmark::DoNotOptimize(y = mul(y, 1.0));
}

BENCHMARK(BM_ChainMulCpu)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainAddCpu)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainMulSim)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NoGradMulCpu);

}  // namespace

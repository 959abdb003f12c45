// Throughput of the cpu kernels on contiguous float32 (issue 11): add, mul by a scalar,
// axpy, sum, copy and fill at 1, 16, 1K, 64K and 1M elements, axpy on the 256 x 784
// weight of the Fashion-MNIST MLP, and the cost of one launch of a 1-element kernel.
// Bytes counted are those a kernel must move (reads + writes), so GB/s compares with
// memory bandwidth. Views are made once, outside the timed loop: the 1-element cases
// time the kernel's own checks and launch, not the caller's View construction. Run with
//   bazel run -c opt //bench:kernels_bench -- --benchmark_min_time=0.2
// and pick the code level and thread count with STREAMGRAD_CPU_CAPABILITY and
// STREAMGRAD_NUM_THREADS (runtime/backend/cpu_settings.h); the context lines print the ones in use.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "runtime/runtime.h"

namespace {
using namespace streamgrad;
namespace k = streamgrad::kernels;

// Contiguous float32 memory, 64-byte aligned as the allocator gives it.
class Buf {
 public:
  explicit Buf(int64_t n) : n_(n) {
    p_ = static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64 + 64));
    for (int64_t i = 0; i < n; ++i) p_[i] = 1.0f + static_cast<float>(i % 7) * 0.25f;
  }
  ~Buf() { std::free(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  k::View view() const {
    k::View v;
    v.data = p_;
    v.sizes = {n_};
    v.strides = {1};
    return v;
  }

 private:
  int64_t n_;
  float* p_;
};

const Stream& cpu() {
  static const Stream s(Device("cpu"));
  return s;
}

// Printed in the header of every run, so that saved output says what it measured.
const bool kContext = [] {
  benchmark::AddCustomContext("cpu_capability", cpu_capability_name(cpu_capability()));
  benchmark::AddCustomContext("machine_cpu_capability",
                              cpu_capability_name(machine_cpu_capability()));
  benchmark::AddCustomContext("num_threads", std::to_string(get_num_threads()));
  return true;
}();

void set_bytes(benchmark::State& state, int64_t n, int64_t arrays) {
  state.SetBytesProcessed(state.iterations() * n * arrays * 4);
}

void BM_Add(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buf a(n), b(n), o(n);
  const k::View va = a.view(), vb = b.view(), vo = o.view();
  for (auto _ : state) k::binary(cpu(), k::Binary::kAdd, vo, va, vb);
  set_bytes(state, n, 3);
}

void BM_MulScalar(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buf a(n), o(n);
  const k::View va = a.view(), vo = o.view();
  for (auto _ : state) k::unary_scalar(cpu(), k::UnaryScalar::kMul, vo, va, 0.5);
  set_bytes(state, n, 2);
}

// In place, as gradient accumulation and the SGD update run it.
void BM_Axpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buf a(n), b(n);
  const k::View va = a.view(), vb = b.view();
  for (auto _ : state) k::axpy(cpu(), va, va, vb, -1e-7);
  set_bytes(state, n, 3);
}

void BM_AxpyWeight256x784(benchmark::State& state) {
  const int64_t n = 256 * 784;
  Buf a(n), b(n);
  k::View va = a.view(), vb = b.view();
  va.sizes = vb.sizes = {256, 784};
  va.strides = vb.strides = {784, 1};
  for (auto _ : state) k::axpy(cpu(), va, va, vb, -1e-7);
  set_bytes(state, n, 3);
}

void BM_Sum(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buf a(n), o(1);
  k::View vo = o.view();
  vo.sizes = {1};
  const k::View va = a.view();
  for (auto _ : state) k::reduce(cpu(), k::Reduce::kSum, vo, va);
  set_bytes(state, n, 1);
}

void BM_Copy(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buf a(n), o(n);
  const k::View va = a.view(), vo = o.view();
  for (auto _ : state) k::copy(cpu(), vo, va);
  set_bytes(state, n, 2);
}

void BM_Fill(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buf o(n);
  const k::View vo = o.view();
  for (auto _ : state) k::fill(cpu(), vo, 0.0);
  set_bytes(state, n, 1);
}

// Real time: with worker threads, the main thread's CPU time would undercount.
// Around the parallel threshold (kParallelGrain): where a second thread starts to pay.
void BM_AddThreshold(benchmark::State& state) { BM_Add(state); }
void BM_AxpyThreshold(benchmark::State& state) { BM_Axpy(state); }

#define SIZES ->Arg(1)->Arg(16)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20)->UseRealTime()
BENCHMARK(BM_Add) SIZES;
BENCHMARK(BM_MulScalar) SIZES;
BENCHMARK(BM_Axpy) SIZES;
BENCHMARK(BM_AxpyWeight256x784)->UseRealTime();
BENCHMARK(BM_Sum) SIZES;
BENCHMARK(BM_Copy) SIZES;
BENCHMARK(BM_Fill) SIZES;
BENCHMARK(BM_AddThreshold)->RangeMultiplier(2)->Range(1 << 14, 1 << 19)->UseRealTime();
BENCHMARK(BM_AxpyThreshold)->RangeMultiplier(2)->Range(1 << 14, 1 << 19)->UseRealTime();

}  // namespace

// nn::OffloadGuard: saved activations leave the device in forward and come back, ahead of
// their nodes, in backward. Gradients are those of the plain run bit for bit, under the
// adversarial and threaded schedulers, with forward on one stream or on two, and the
// stream sanitizer finds nothing; device memory held by the graph shrinks; prefetching
// brings tensors back before their nodes ask.
#include <catch2/catch.hpp>

#include <optional>
#include <utility>
#include <vector>

#include "engine/backward.h"
#include "engine/factories.h"
#include "nn/offload.h"
#include "ops/ops.h"
#include "runtime/observe/stream_sanitizer.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TensorOptions on(Device d) { return TensorOptions().dtype(DType::kFloat32).device(d); }

// A few layers of matmul and tanh: every layer saves activations of 64 KiB.
struct Net {
  explicit Net(Device d) {
    for (int i = 0; i < 4; ++i) {
      std::vector<float> w(128 * 128);
      for (size_t k = 0; k < w.size(); ++k) w[k] = 0.01f * static_cast<float>((k * 7 + i) % 13) - 0.06f;
      weights.push_back(from_vector<float>(w, {128, 128}, on(d)).requires_grad_());
    }
    std::vector<float> v(128 * 128);
    for (size_t k = 0; k < v.size(); ++k) v[k] = 0.02f * static_cast<float>(k % 17) - 0.15f;
    input = from_vector<float>(v, {128, 128}, on(d));
  }
  // Layer i runs on streams[i % n]; each stream waits for the one before it and keeps
  // the block it reads from being reused early (record_stream), as users write it.
  Tensor forward(const std::vector<Stream>& streams) const {
    const Stream caller = current_stream(input.device());
    Stream prev = caller;
    Tensor h = input;
    for (size_t i = 0; i < weights.size(); ++i) {
      const Stream s = streams[i % streams.size()];
      s.wait_stream(prev);
      if (s != prev) h.storage().record_stream(s);
      StreamGuard g(s);
      h = tanh(matmul(h, weights[i]));
      prev = s;
    }
    caller.wait_stream(prev);
    if (caller != prev) h.storage().record_stream(caller);
    return sum(mul(h, h));
  }
  std::vector<std::vector<float>> grads() const {
    std::vector<std::vector<float>> out;
    for (const Tensor& w : weights) out.push_back(to(w.grad(), Device("cpu")).to_vector<float>());
    return out;
  }
  void zero() {
    for (Tensor& w : weights) w.set_grad(Tensor());
  }
  std::vector<Tensor> weights;
  Tensor input;
};

nn::OffloadOptions options(int prefetch, int copy_window = 2) {
  nn::OffloadOptions o;
  o.min_bytes = 1024;
  o.prefetch = prefetch;
  o.copy_window = copy_window;
  return o;
}

SimSchedulerOptions scheduler(SimSchedulerKind kind, uint64_t seed) {
  SimSchedulerOptions o;
  o.kind = kind;
  o.policy = SimPolicy::kAdversarial;
  o.seed = seed;
  return o;
}

TEST_CASE("offloaded activations give the plain run's gradients, bit for bit, sanitizer-clean",
          "[offload][streams]") {
  const SimSchedulerKind kind =
      GENERATE(SimSchedulerKind::kDeterministic, SimSchedulerKind::kThreaded);
  const int two_streams = GENERATE(0, 1);
  // {prefetch, copy_window}: nothing ahead and every copy waited for at once; two ahead.
  const auto ahead = GENERATE(std::make_pair(0, 0), std::make_pair(2, 2));
  const Device d("sim:0");
  SimSchedulerScope scope(scheduler(kind, 11));
  std::vector<Stream> streams{Stream::create(d)};
  if (two_streams) streams.push_back(Stream::create(d));
  Net net(d);
  sum(net.forward(streams)).backward();
  const auto plain = net.grads();
  net.zero();
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  for (int step = 0; step < 3; ++step) {
    Tensor loss;
    {
      nn::OffloadGuard offload(options(ahead.first, ahead.second));
      loss = net.forward(streams);
    }
    loss.backward();
    const bool same = net.grads() == plain;  // (a bool: a failure prints no 64K floats)
    CHECK(same);
    net.zero();
  }
  synchronize(d);
  const auto found = san.findings();
  CHECK(found.empty());
  if (!found.empty()) WARN(found[0].message);
}

TEST_CASE("offload frees the device memory the graph held, and prefetch runs ahead",
          "[offload][memory]") {
  const Device d("sim:1");
  const std::vector<Stream> streams{current_stream(d)};
  Net net(d);
  synchronize(d);
  const int64_t base = memory_stats(d).allocated_bytes.current;
  int64_t plain_held = 0, offload_held = 0;
  {
    Tensor loss = net.forward(streams);
    synchronize(d);
    plain_held = memory_stats(d).allocated_bytes.current - base;
    loss.backward();
  }
  const std::vector<std::vector<float>> plain = net.grads();
  net.zero();
  const nn::OffloadStats before = nn::offload_stats();
  {
    Tensor loss;
    {
      nn::OffloadGuard offload(options(2));
      loss = net.forward(streams);
    }
    synchronize(d);
    offload_held = memory_stats(d).allocated_bytes.current - base;
    loss.backward();
  }
  const bool same = net.grads() == plain;
  CHECK(same);
  // Plain: the 4 tanh outputs of 64 KiB each are held by the graph; offloaded: none.
  CHECK(plain_held >= 4 * 64 * 1024);
  CHECK(offload_held < plain_held / 4);
  const nn::OffloadStats after = nn::offload_stats();
  const size_t offloaded = after.offloaded - before.offloaded;
  // 4 tanh outputs, 4 matmul inputs (the input batch and 3 tanh outputs), and the last
  // tanh output twice in mul(h, h): 10 saves (the weights are parameters and stay) of 5
  // tensors, each copied once.
  CHECK(offloaded == 5);
  CHECK(after.deduplicated - before.deduplicated == 5);
  CHECK(after.offloaded_bytes - before.offloaded_bytes == 5 * 64 * 1024);
  // Only the first tensor backward asks for comes back late; the rest were prefetched.
  CHECK(after.fetched_late - before.fetched_late == 1);
  CHECK(after.prefetched - before.prefetched == offloaded - 1);
}

// The host of a training loop never waits for the device and runs steps ahead of it (under
// the deterministic scheduler, until it synchronizes). Blocks the host frees are then
// reused in stream order only: an offloaded block kept by record_stream would stay
// reserved until the device caught up, and memory would grow with every step.
TEST_CASE("offload reserves no more than the plain run while the host runs steps ahead",
          "[offload][memory][streams]") {
  const int two_streams = GENERATE(0, 1);
  const Device d("sim:1");
  SimSchedulerScope scope(scheduler(SimSchedulerKind::kDeterministic, 5));
  std::vector<Stream> streams{current_stream(d)};
  if (two_streams) streams.push_back(Stream::create(d));
  Net net(d);
  constexpr int kSteps = 6;
  {
    // First fill the pinned pool with another device's buffers: the run below must make
    // room for its own (the oldest given go), or it would allocate afresh every step.
    const Device other("sim:0");
    Net warm(other);
    Tensor loss;
    {
      nn::OffloadGuard guard(options(2));
      loss = warm.forward({current_stream(other)});
    }
    loss.backward();
    synchronize(other);
  }
  int64_t host_base = 0;
  auto reserved_peak = [&](bool offload) {
    net.zero();
    synchronize(d);
    empty_cache(d);
    reset_peak_stats(d);
    host_empty_cache();
    reset_peak_host_memory_stats();
    // Buffers recycled from earlier cases stay allocated: only growth counts.
    host_base = host_memory_stats().reserved_bytes.current;
    for (int step = 0; step < kSteps; ++step) {
      Tensor loss;
      {
        std::optional<nn::OffloadGuard> guard;
        if (offload) guard.emplace(options(2));
        loss = net.forward(streams);
      }
      loss.backward();
    }
    return memory_stats(d).reserved_bytes.peak;
  };
  const int64_t plain = reserved_peak(false);
  const auto plain_grads = net.grads();
  const int64_t offloaded = reserved_peak(true);
  const MemoryStats pinned = host_memory_stats();
  const bool same = net.grads() == plain_grads;
  CHECK(same);
  INFO("reserved peak over " << kSteps << " steps: plain " << plain << " B, offload "
                             << offloaded << " B");
  // Beyond the plain run: at most the guard's window (copy_window 2) and the tensors on
  // their way back (prefetch 2, and the one asked for), a 64 KiB block each. Kept until
  // the device caught up, the offloaded blocks of 6 steps were 6.4 MB against plain's
  // 1.0 MB (one stream) and 8.4 against 4.5 MB (two).
  CHECK(offloaded <= plain + 5 * 64 * 1024);
  // Pinned host memory: a step saves 10 tensors of 64 KiB (copied once per stream that
  // saved each: 5 copies on one stream), and their buffers are recycled for the next
  // step's saves in device order. Returned to the host allocator,
  // which reuses a block only once it sees the copy streams pass it, they were 6 steps'
  // worth (3.9 MB).
  const int64_t step_bytes = 10 * 64 * 1024;
  const int64_t pinned_growth = pinned.reserved_bytes.peak - host_base;
  INFO("pinned host memory over " << kSteps << " steps: reserved peak grew by "
                                  << pinned_growth << " B");
  CHECK(pinned_growth <= 2 * step_bytes);
}

// A backward that stops early (here: a gradient asked for an activation half-way) leaves
// tensors prefetched but never taken. Their memory goes back to its stream only after
// that stream waits for the copies writing it, so work reusing it is never overwritten.
TEST_CASE("copies brought back but never used are given back after they are written",
          "[offload][streams]") {
  const SimSchedulerKind kind =
      GENERATE(SimSchedulerKind::kDeterministic, SimSchedulerKind::kThreaded);
  const Device d("sim:0");
  SimSchedulerScope scope(scheduler(kind, 3));
  Net net(d);
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  const nn::OffloadStats before = nn::offload_stats();
  {
    std::vector<Tensor> hs;
    Tensor loss;
    {
      nn::OffloadGuard offload(options(2));
      Tensor h = net.input;
      for (const Tensor& w : net.weights) {
        h = tanh(matmul(h, w));
        hs.push_back(h);
      }
      loss = sum(mul(h, h));
    }
    grad({loss}, {hs[2]});
  }
  const nn::OffloadStats after = nn::offload_stats();
  const size_t fetched = (after.prefetched + after.fetched_late) -
                         (before.prefetched + before.fetched_late);
  CHECK(fetched < after.offloaded - before.offloaded);  // some were never asked for
  std::vector<Tensor> reused;
  for (int i = 0; i < 16; ++i) reused.push_back(full({128, 128}, i, on(d)));
  bool right = true;
  for (int i = 0; i < 16; ++i) {
    const std::vector<float> v = to(reused[i], Device("cpu")).to_vector<float>();
    for (float x : v) right = right && x == static_cast<float>(i);
  }
  CHECK(right);
  synchronize(d);
  const auto found = san.findings();
  CHECK(found.empty());
  if (!found.empty()) WARN(found[0].message);
}

// Pinned buffers are recycled for later saves of the same shape. A step whose forward runs
// on a stream that nothing orders after the previous backward must still not overwrite a
// buffer before that backward's copy-in read it.
TEST_CASE("a recycled pinned buffer is written only after its last copy-in read it",
          "[offload][streams]") {
  const SimSchedulerKind kind =
      GENERATE(SimSchedulerKind::kDeterministic, SimSchedulerKind::kThreaded);
  const uint64_t seed = GENERATE(1, 2, 3);
  const Device d("sim:0");
  SimSchedulerScope scope(scheduler(kind, seed));
  Net first(d);
  Net second(d);  // the same shapes, other values
  for (Tensor& w : second.weights) w = mul(w, full({1}, 1.5, on(d))).detach().requires_grad_();
  second.input = mul(second.input, full({1}, -2.0, on(d)));
  const Stream a = Stream::create(d);
  const Stream b = Stream::create(d);
  {
    StreamGuard on_a(a);
    sum(first.forward({a})).backward();
  }
  synchronize(d);  // the gradients were made on a; grads() copies on the default stream
  const auto plain = first.grads();
  first.zero();
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  {
    StreamGuard on_a(a);
    Tensor loss;
    {
      nn::OffloadGuard offload(options(2));
      loss = first.forward({a});
    }
    loss.backward();
  }
  {
    StreamGuard on_b(b);  // b is not ordered after a's backward
    Tensor loss;
    {
      nn::OffloadGuard offload(options(2));
      loss = second.forward({b});
    }
    loss.backward();
  }
  synchronize(d);
  const bool same = first.grads() == plain;
  CHECK(same);
  const auto found = san.findings();
  CHECK(found.empty());
  if (!found.empty()) WARN(found[0].message);
}

TEST_CASE("offload options are checked", "[offload]") {
  CHECK_THROWS_AS(nn::OffloadGuard(options(-1)), ValueError);
  CHECK_THROWS_AS(nn::OffloadGuard(options(2, -1)), ValueError);
  CHECK_THROWS_WITH(nn::OffloadGuard(options(2, -3)), Catch::Contains("copy_window (-3)"));
}

TEST_CASE("small tensors and cpu tensors stay where they are", "[offload]") {
  const nn::OffloadStats before = nn::offload_stats();
  Tensor x = ones({8}, on(Device("sim:0"))).requires_grad_();
  Tensor c = ones({1024}, on(Device("cpu"))).requires_grad_();
  Tensor loss;
  {
    nn::OffloadGuard offload(options(2));
    loss = add(sum(tanh(x)), to(sum(tanh(c)), Device("sim:0")));
  }
  loss.backward();
  CHECK(nn::offload_stats().offloaded == before.offloaded);
  CHECK(to(x.grad(), Device("cpu")).to_vector<float>()[0] == Approx(1 - std::tanh(1.0) * std::tanh(1.0)));
}

}  // namespace
}  // namespace streamgrad

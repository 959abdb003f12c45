// parallel_for (kernels/host/parallel.h) and the kernels that use it: every index is
// visited once in equal chunks, a worker can leave its caller's processor, nested calls
// run inline, many callers at once (std::threads, sim streams) finish, errors reach the
// caller, an idle worker spins for the time set before it sleeps; and kernels above the
// threshold give the same bits for 1, 2, 3 and 7 threads.
#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "kernels/host/parallel.h"
#include "kernels/kernels.h"
#include "tests/kernels/level_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using k::cpu::parallel_for;
using testing::Buffer;
using testing::Shape;
using testing::ThreadsScope;

TEST_CASE("parallel_for visits every index once, in equal chunks", "[parallel]") {
  const int threads = GENERATE(1, 2, 3, 7);
  ThreadsScope scope(threads);
  for (int64_t n : {0, 1, 99, 100, 101, 1000, 12345, 40000}) {
    for (int64_t grain : {1, 7, 100}) {
      INFO(threads << " threads, n " << n << ", grain " << grain);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n) + 10);
      std::mutex mu;
      std::set<std::thread::id> seen;
      std::vector<int64_t> lengths;
      int64_t calls = 0;
      parallel_for(10, 10 + n, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        std::lock_guard<std::mutex> lk(mu);
        ++calls;
        seen.insert(std::this_thread::get_id());
        if (e != 10 + n) lengths.push_back(e - b);  // every chunk but the last
      });
      for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i + 10].load() == 1);
      for (int64_t i = 0; i < 10; ++i) REQUIRE(hits[i].load() == 0);
      // At most the setting's threads took part; one call when it was too small to split.
      CHECK(static_cast<int>(seen.size()) <= threads);
      if (n <= grain || threads == 1) {
        CHECK(calls == (n > 0 ? 1 : 0));
        continue;
      }
      const int64_t chunk = k::cpu::detail::chunk_size(n, grain, threads);
      for (int64_t length : lengths) CHECK(length == chunk);
      CHECK(calls == (n + chunk - 1) / chunk);
      // At most four shares per thread, and a grain each where n allows.
      CHECK(calls <= 4 * threads);
      if (n >= grain * threads) CHECK(chunk >= grain);
    }
  }
}

TEST_CASE("a split gives every thread an equal share, in whole cache lines when large",
          "[parallel]") {
  using k::cpu::detail::chunk_size;
  const int64_t g = k::cpu::kParallelGrain;
  // ReLU over [64, 64, 7, 7] on two threads: 3.06 grains in two halves, not 2 + 1.06.
  const int64_t relu = 64 * 64 * 7 * 7;
  REQUIRE(relu == 3 * g + g / 16);
  CHECK(chunk_size(relu, g, 2) == relu / 2);
  // Just over a grain: two halves (rounded up to 64 items), not a grain and a sliver.
  CHECK(chunk_size(g + 1, g, 2) == (g / 2 + 64));
  // Plenty of grains: four chunks per thread.
  CHECK(chunk_size(64 * g, g, 2) == 8 * g);
  CHECK(chunk_size(64 * g, g, 3) == 349568);  // 64 g / 12 = 349525.3, up to 64 items
  // Small chunks (rows, channels) are not rounded.
  CHECK(chunk_size(16, 1, 2) == 2);
  CHECK(chunk_size(101, 7, 7) == 8);
}

#if defined(__linux__)
TEST_CASE("a thread moved off a processor went elsewhere, its allowed set unchanged",
          "[parallel]") {
  using k::cpu::detail::move_off;
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  int first = 0;
  while (!CPU_ISSET(first, &allowed)) ++first;
  auto allowed_now = [&] {
    cpu_set_t now;
    REQUIRE(sched_getaffinity(0, sizeof(now), &now) == 0);
    return CPU_EQUAL(&now, &allowed) != 0;
  };
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  if (CPU_COUNT(&allowed) >= 2) {  // CI's machines have two
    // Start on `first` (the scheduler may move the thread before move_off looks; the
    // checks hold wherever it starts).
    REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
    REQUIRE(sched_setaffinity(0, sizeof(allowed), &allowed) == 0);
    const int to = move_off(first);
    CHECK(to >= 0);
    CHECK(to != first);
    CHECK(CPU_ISSET(to, &allowed));
    CHECK(allowed_now());
  }
  CHECK(move_off(-1) == -1);
  CHECK(allowed_now());
  // With one allowed processor there is nowhere to go.
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  CHECK(move_off(first) == -1);
  cpu_set_t now;
  REQUIRE(sched_getaffinity(0, sizeof(now), &now) == 0);
  CHECK(CPU_EQUAL(&now, &one));
  REQUIRE(sched_setaffinity(0, sizeof(allowed), &allowed) == 0);
}
#endif

TEST_CASE("a parallel_for inside a chunk runs inline on that chunk's thread", "[parallel]") {
  ThreadsScope scope(3);
  std::atomic<int64_t> total{0}, outer_calls{0}, inner_calls{0};
  std::atomic<bool> split{false}, moved{false};
  parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
    const std::thread::id outer = std::this_thread::get_id();
    ++outer_calls;
    // Big enough to split if it were not nested.
    parallel_for(0, 1000, 1, [&](int64_t ib, int64_t ie) {
      ++inner_calls;
      if (ib != 0 || ie != 1000) split = true;
      if (std::this_thread::get_id() != outer) moved = true;
      total += (ie - ib) * (e - b);
    });
  });
  CHECK(total.load() == 64 * 1000);
  // One whole-range call per nested parallel_for.
  CHECK(inner_calls.load() == outer_calls.load());
  CHECK_FALSE(split.load());
  CHECK_FALSE(moved.load());
}

TEST_CASE("parallel_for from many threads at once", "[parallel][threads]") {
  ThreadsScope scope(3);
  constexpr int kCallers = 8;
  std::vector<int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        std::vector<int64_t> part(100, 0);
        parallel_for(0, 100, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) part[i] = i * (t + 1);
        });
        for (int64_t v : part) sums[t] += v;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  for (int t = 0; t < kCallers; ++t) CHECK(sums[t] == 20 * 4950 * (t + 1));
}

TEST_CASE("an exception in a chunk reaches the caller after every chunk ran", "[parallel]") {
  ThreadsScope scope(2);
  std::atomic<int64_t> done{0};
  CHECK_THROWS_WITH(parallel_for(0, 100, 1,
                                 [&](int64_t b, int64_t e) {
                                   done += e - b;
                                   if (b == 0) throw std::runtime_error("chunk failed");
                                 }),
                    "chunk failed");
  CHECK(done.load() == 100);
}

// The spin (runtime/backend/cpu_settings.h): with 1 s of it a worker stays awake through
// gaps of milliseconds between jobs; with none it sleeps after every job it ran. Each job
// is four chunks of 2 ms, so the worker takes part even when it wakes slowly.
TEST_CASE("an idle worker spins for get_thread_spin_us() before it sleeps",
          "[parallel][threads]") {
  ThreadsScope scope(2);
  const int saved = get_thread_spin_us();
  const auto jobs = [](int n) {
    for (int i = 0; i < n; ++i) {
      parallel_for(0, 4, 1, [](int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  if (std::thread::hardware_concurrency() >= 2) {
    set_thread_spin_us(kMaxSpinUs);
    jobs(1);  // the worker, asleep or not before, is spinning after this
    const int64_t before = k::cpu::detail::worker_sleeps();
    jobs(20);
    CHECK(k::cpu::detail::worker_sleeps() == before);
  } else {
    WARN("one processor: workers never spin (more threads than processors), not checked");
  }
  set_thread_spin_us(0);
  const int64_t before = k::cpu::detail::worker_sleeps();
  jobs(20);
  CHECK(k::cpu::detail::worker_sleeps() > before);
  set_thread_spin_us(saved);
}

// Runs `kernel` once per thread count into a fresh buffer holding `start`; every run must
// leave the bits of the one-thread run.
template <typename T>
void expect_same_bits_for_thread_counts(const std::vector<T>& start,
                                        const std::function<void(const Buffer<T>&)>& kernel) {
  std::vector<T> one;
  for (int threads : {1, 2, 3, 7}) {
    INFO(threads << " threads");
    ThreadsScope scope(threads);
    const Buffer<T> out(Device("cpu"), start);
    kernel(out);
    if (one.empty()) {
      one = out.read();
    } else if (!testing::same_bits(out.read(), one)) {
      return;
    }
  }
}

TEMPLATE_TEST_CASE("kernels above the threshold give the same bits for any thread count",
                   "[parallel]", float, double) {
  using T = TestType;
  const Device cpu("cpu");
  const Stream s(cpu);
  const int64_t n = 3 * k::cpu::kParallelGrain + 13;  // 3 chunks: 3 threads all take part
  const std::vector<T> va = testing::mixed_values<T>(n, 1), vb = testing::mixed_values<T>(n, 2);
  const Buffer<T> a(cpu, va), b(cpu, vb);
  SECTION("element-wise") {
    expect_same_bits_for_thread_counts<T>(va, [&](const Buffer<T>& out) {
      k::axpy(s, out.view(), out.view(), b.view(), -0.25);  // in place
      k::binary(s, k::Binary::kMul, out.view(), out.view(), a.view());
      k::unary(s, k::Unary::kTanh, out.view(), out.view());  // the vector math path
      // Strided: every other element of a [n / 2, 2] view.
      const Shape half({n / 2}, {2}, 1);
      k::unary_scalar(s, k::UnaryScalar::kAdd, out.view(half), a.view(half), 1.5);
      // Rows of 787 in a padded matrix: chunk edges fall inside rows.
      const int64_t cols = 787, rows = (n - 3) / (cols + 1);
      const Shape padded({rows, cols}, {cols + 1, 1}, 2);
      k::binary(s, k::Binary::kSub, out.view(padded), b.view(padded), out.view(padded));
    });
  }
  SECTION("transcendental kernels, split from kMathGrain elements on") {
    // 3 chunks of the smaller grain, an odd length: SLEEF's blocks and vector tails fall
    // elsewhere for each thread count.
    const Shape part({3 * k::cpu::kMathGrain + 13});
    expect_same_bits_for_thread_counts<T>(va, [&](const Buffer<T>& out) {
      k::unary(s, k::Unary::kGelu, out.view(part), a.view(part));
      k::binary(s, k::Binary::kGeluBackward, out.view(part), out.view(part), b.view(part));
      k::unary(s, k::Unary::kSigmoid, out.view(part), out.view(part));
      k::unary_scalar(s, k::UnaryScalar::kPow, out.view(part), out.view(part), 1.5);
    });
  }
  SECTION("fill and copy") {
    expect_same_bits_for_thread_counts<T>(std::vector<T>(n, T(0)), [&](const Buffer<T>& out) {
      k::copy(s, out.view(), a.view());
      k::fill(s, out.view(Shape({n / 3}, {3}, 2)), 7.0);
    });
  }
  // One long row (blocks in parallel), many rows (outputs in parallel), columns.
  const std::vector<T> finite = testing::random_values<T>(n, -1, 1, 3);
  const Buffer<T> f(cpu, finite);
  for (k::Reduce op : {k::Reduce::kSum, k::Reduce::kMax, k::Reduce::kMin}) {
    INFO("reduce " << static_cast<int>(op));
    const int64_t rows = 64, cols = n / 64;
    const std::vector<std::pair<Shape, Shape>> cases = {
        {Shape({n}), Shape({1})},
        {Shape({rows, cols}), Shape({rows, 1})},
        {Shape({cols, rows}), Shape({1, rows})},
    };
    for (const auto& c : cases) {
      expect_same_bits_for_thread_counts<T>(
          std::vector<T>(static_cast<size_t>(c.second.numel()), T(0)),
          [&](const Buffer<T>& out) { k::reduce(s, op, out.view(c.second), f.view(c.first)); });
    }
  }
}

TEST_CASE("large kernels on several sim streams and cpu threads at once", "[parallel][threads]") {
  ThreadsScope scope(3);
  const int64_t n = 3 * k::cpu::kParallelGrain + 5;
  const std::vector<float> va = testing::random_values<float>(n, -1, 1, 4);
  double want = 0;
  for (float v : va) want += 2 * static_cast<double>(v);
  // Half of the callers launch on their own sim stream (run by sim workers), half on cpu
  // (run by the calling thread). Buffers are made here: Catch2 is not thread-safe.
  constexpr int kCallers = 6;
  std::vector<Device> devices;
  std::vector<std::unique_ptr<Buffer<float>>> ins, outs, totals;
  for (int t = 0; t < kCallers; ++t) {
    devices.push_back(Device(t % 2 == 0 ? "sim:0" : "cpu"));
    ins.push_back(std::make_unique<Buffer<float>>(devices[t], va));
    outs.push_back(std::make_unique<Buffer<float>>(devices[t], n, 0.0f));
    totals.push_back(std::make_unique<Buffer<float>>(devices[t], 1, 0.0f));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      const Stream s = devices[t].is_cpu() ? Stream(devices[t]) : Stream::create(devices[t]);
      for (int round = 0; round < 3; ++round) {
        k::binary(s, k::Binary::kAdd, outs[t]->view(), ins[t]->view(), ins[t]->view());
        k::reduce(s, k::Reduce::kSum, totals[t]->view(Shape({1})), outs[t]->view());
      }
      s.synchronize();
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<float> sums;
  for (int t = 0; t < kCallers; ++t) sums.push_back(totals[t]->read()[0]);
  for (float v : sums) CHECK(v == Approx(want).epsilon(1e-5));
  // Every caller computed the same bits.
  for (float v : sums) CHECK(std::memcmp(&v, &sums[0], sizeof v) == 0);
}

}  // namespace
}  // namespace streamgrad

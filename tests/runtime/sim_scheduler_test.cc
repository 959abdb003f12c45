// The simulated device's schedulers: a missing wait is caught deterministically by the
// adversarial policy, a present wait gives the right value under every policy and seed,
// and the threaded scheduler with jitter agrees over many runs. PCT: sim_pct_test.cc.
#include <catch2/catch.hpp>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

// Producer on stream A writes 1 into a buffer that holds 0; consumer on stream B copies
// it into `out` (host-side work, as a kernel on the sim device would do). Returns what the
// consumer saw.
int producer_consumer(bool with_wait) {
  // Reused across runs: streams are never destroyed, so each run would add two.
  static const Stream a = Stream::create(Device("sim:0"));
  static const Stream b = Stream::create(Device("sim:0"));
  Storage buf = Storage::allocate(sizeof(int), a);
  int* p = static_cast<int*>(buf.data());
  *p = 0;  // the buffer is fresh and no stream has touched it yet
  auto out = std::make_shared<int>(-1);
  const MemRange w[] = {{p, sizeof(int)}};
  launch(a, {"produce", {}, w}, [p] { *p = 1; });
  if (with_wait) b.wait_stream(a);
  buf.record_stream(b);
  const MemRange r[] = {{p, sizeof(int)}};
  launch(b, {"consume", r, {}}, [p, out] { *out = *p; });
  b.synchronize();
  a.synchronize();
  return *out;
}

SimSchedulerOptions deterministic(SimPolicy policy, uint64_t seed) {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = policy;
  o.seed = seed;
  return o;
}

TEST_CASE("adversarial policy exposes a missing wait as a stale read", "[sim][scheduler]") {
  SanitizerSuppression races_on_purpose;  // the test races to show the rule
  for (uint64_t seed : {0u, 1u, 42u}) {
    SimSchedulerScope scope(deterministic(SimPolicy::kAdversarial, seed));
    CHECK(producer_consumer(/*with_wait=*/false) == 0);
  }
}

TEST_CASE("with the wait, every policy and seed reads the produced value", "[sim][scheduler]") {
  const SimPolicy policy =
      GENERATE(SimPolicy::kAdversarial, SimPolicy::kRandom, SimPolicy::kRoundRobin,
               SimPolicy::kPct);
  INFO("policy " << sim_policy_name(policy));
  int wrong = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SimSchedulerScope scope(deterministic(policy, seed));
    if (producer_consumer(/*with_wait=*/true) != 1) ++wrong;
  }
  CHECK(wrong == 0);
}

TEST_CASE("threaded scheduler with jitter reads the produced value in 1000 runs",
          "[sim][scheduler][threaded]") {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kThreaded;
  o.jitter_us = 50;
  o.seed = 7;
  SimSchedulerScope scope(o);
  int wrong = 0;
  for (int run = 0; run < 1000; ++run) {
    if (producer_consumer(/*with_wait=*/true) != 1) ++wrong;
  }
  CHECK(wrong == 0);
}

// The interleaving of tasks on three streams, as the order in which they ran.
std::vector<int> interleaving(const SimSchedulerOptions& o) {
  SimSchedulerScope scope(o);
  const Device d("sim:0");
  std::vector<Stream> streams{Stream::create(d), Stream::create(d), Stream::create(d)};
  auto order = std::make_shared<std::vector<int>>();
  for (int i = 0; i < 12; ++i) {
    launch(streams[i % 3], {"record_order", {}, {}}, [order, i] { order->push_back(i); });
  }
  sim_run_until_idle();
  return *order;
}

TEST_CASE("a deterministic seed gives the same interleaving every run", "[sim][scheduler]") {
  const SimPolicy policy =
      GENERATE(SimPolicy::kAdversarial, SimPolicy::kRandom, SimPolicy::kRoundRobin,
               SimPolicy::kPct);
  INFO("policy " << sim_policy_name(policy));
  const auto first = interleaving(deterministic(policy, 3));
  CHECK(first.size() == 12);
  CHECK(interleaving(deterministic(policy, 3)) == first);
  if (policy == SimPolicy::kAdversarial) {
    // Latest-enqueued first: each stream's queue drains from the most recent head.
    CHECK(first.front() != 0);
  }
  if (policy == SimPolicy::kRoundRobin) {
    CHECK(first == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  }
}

TEST_CASE("random policy: different seeds give different interleavings", "[sim][scheduler]") {
  std::set<std::vector<int>> seen;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    seen.insert(interleaving(deterministic(SimPolicy::kRandom, seed)));
  }
  CHECK(seen.size() > 1);
}

TEST_CASE("deterministic scheduler runs nothing until the host waits or steps",
          "[sim][scheduler]") {
  SimSchedulerScope scope(deterministic(SimPolicy::kRoundRobin, 0));
  const Stream s = Stream::create(Device("sim:1"));
  std::atomic<int> ran{0};
  launch(s, {"count", {}, {}}, [&ran] { ++ran; });
  launch(s, {"count", {}, {}}, [&ran] { ++ran; });
  CHECK(ran == 0);
  CHECK_FALSE(s.query());
  CHECK(sim_step());
  CHECK(ran == 1);
  s.synchronize();
  CHECK(ran == 2);
  CHECK(s.query());
  CHECK_FALSE(sim_step());  // nothing left
}

TEST_CASE("an exception in asynchronous work surfaces at the next synchronize",
          "[sim][errors]") {
  const Stream s = Stream::create(Device("sim:0"));
  launch(s, {"faulty_kernel", {}, {}}, [] { throw ValueError("faulty_kernel: bad value"); });
  CHECK_THROWS_WITH(s.synchronize(), Catch::Contains("faulty_kernel: bad value"));
  s.synchronize();  // reported once, then the stream is usable again
  std::atomic<bool> ran{false};
  launch(s, {"ok", {}, {}}, [&ran] { ran = true; });
  s.synchronize();
  CHECK(ran);
}

TEST_CASE("launch blocking surfaces an error at the launch that caused it",
          "[sim][errors][launch_blocking]") {
  set_launch_blocking(true);
  const Stream s = Stream::create(Device("sim:0"));
  CHECK_THROWS_WITH(
      launch(s, {"faulty_kernel", {}, {}}, [] { throw ValueError("faulty_kernel failed"); }),
      Catch::Contains("faulty_kernel failed"));
  set_launch_blocking(false);
}

TEST_CASE("poisoned new memory reads as NaN until written", "[sim]") {
  const Device d("sim:1");
  empty_cache(d);  // the allocation below is fresh memory from the device
  set_sim_poison_new_memory(true);
  Storage poisoned = Storage::allocate(3 * 4096 + 4, d);
  set_sim_poison_new_memory(false);
  const unsigned char* p = static_cast<const unsigned char*>(poisoned.data());
  int not_ff = 0;
  for (size_t i = 0; i < poisoned.nbytes(); ++i) not_ff += p[i] != 0xFF ? 1 : 0;
  CHECK(not_ff == 0);
  float f;
  std::memcpy(&f, p, sizeof f);
  CHECK(std::isnan(f));
}

TEST_CASE("scheduler names parse, unknown names are a ValueError", "[sim]") {
  CHECK(parse_sim_policy("adversarial") == SimPolicy::kAdversarial);
  CHECK(parse_sim_policy("pct") == SimPolicy::kPct);
  CHECK(parse_sim_scheduler("deterministic") == SimSchedulerKind::kDeterministic);
  CHECK_THROWS_AS(parse_sim_policy("fifo"), ValueError);
  CHECK_THROWS_AS(parse_sim_scheduler("gpu"), ValueError);
}

}  // namespace
}  // namespace streamgrad

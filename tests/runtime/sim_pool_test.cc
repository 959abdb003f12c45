// Resource bounds of the sim device (runtime/sim/sim.h): a stream's queue is finite and a
// launch on a full one holds the host back, a bounded pool of threads serves any number
// of streams, and a worker thread that cannot start is a DeviceError, never a hang.
// The target sets STREAMGRAD_SIM_QUEUE_DEPTH=16 and STREAMGRAD_SIM_WORKERS=4 so that the
// bounds are small enough to exceed cheaply.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

// Threads of this process, as the kernel counts them.
int process_threads() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  FAIL("no Threads: line in /proc/self/status");
  return -1;
}

SimSchedulerOptions deterministic(SimPolicy policy) {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = policy;
  return o;
}

// Appends to a log from tasks; the lock makes the log safe whatever the streams' order.
struct Log {
  std::mutex mu;
  std::vector<int> seen;
  void add(int i) {
    std::lock_guard<std::mutex> lk(mu);
    seen.push_back(i);
  }
};

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST_CASE("the queue bounds come from the environment", "[sim][pool]") {
  CHECK(sim_queue_limit() == 16);
  CHECK(sim_worker_limit() == 4);
}

TEST_CASE("a launch on a full stream blocks the host until the stream makes room",
          "[sim][pool]") {
  const Stream s = Stream::create("sim:0");
  const size_t limit = sim_queue_limit();
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  launch(s, {"gate", {}, {}}, [opened] { opened.wait(); });
  // The stream is held until its queue is full, so the bound is reached and the host must
  // block at it; a queue without a bound grows past it before the gate opens.
  std::thread opener([&] {
    while (sim_queue_depth(s) < limit) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    gate.set_value();
  });
  auto log = std::make_shared<Log>();
  const int n = static_cast<int>(10 * limit);
  size_t worst = 0;
  for (int i = 0; i < n; ++i) {
    launch(s, {"append", {}, {}}, [log, i] { log->add(i); });
    worst = std::max(worst, sim_queue_depth(s));
  }
  opener.join();
  s.synchronize();
  CHECK(worst <= limit);
  CHECK(sim_peak_queue_depth(s) == limit);
  CHECK(log->seen == iota(n));  // in order, none lost
}

TEST_CASE("deterministic scheduler: a launch on a full stream runs queued work itself",
          "[sim][pool]") {
  const SimPolicy policy =
      GENERATE(SimPolicy::kRoundRobin, SimPolicy::kRandom, SimPolicy::kAdversarial);
  INFO("policy " << sim_policy_name(policy));
  SimSchedulerScope scope(deterministic(policy));
  const Stream producer = Stream::create("sim:0");
  const Stream consumer = Stream::create("sim:0");
  const size_t limit = sim_queue_limit();
  // The consumer's work may only run after the producer's: the host must run the
  // producer first to make room on the consumer, honouring the wait.
  auto flag = std::make_shared<std::atomic<int>>(0);
  launch(producer, {"produce", {}, {}}, [flag] { flag->store(1); });
  Event produced;
  produced.record(producer);
  produced.block(consumer);
  auto log = std::make_shared<Log>();
  auto stale = std::make_shared<std::atomic<int>>(0);
  const int n = static_cast<int>(10 * limit);
  size_t worst = 0;
  for (int i = 0; i < n; ++i) {
    launch(consumer, {"consume", {}, {}}, [log, flag, stale, i] {
      if (flag->load() != 1) stale->fetch_add(1);
      log->add(i);
    });
    worst = std::max(worst, sim_queue_depth(consumer));
  }
  CHECK(worst <= limit);
  {
    std::lock_guard<std::mutex> lk(log->mu);
    CHECK_FALSE(log->seen.empty());  // the launching thread ran work before any host wait
  }
  consumer.synchronize();
  CHECK(stale->load() == 0);
  CHECK(log->seen == iota(n));
}

TEST_CASE("10,000 streams share a bounded pool of worker threads", "[sim][pool]") {
  const int threads_before = process_threads();
  const int n = 10000;
  std::vector<Stream> streams;
  streams.reserve(n);
  for (int i = 0; i < n; ++i) streams.push_back(Stream::create("sim:1"));
  auto ran = std::make_shared<std::atomic<int>>(0);
  for (const Stream& s : streams) launch(s, {"count", {}, {}}, [ran] { ran->fetch_add(1); });
  const int threads_during = process_threads();
  synchronize(Device("sim:1"));
  CHECK(ran->load() == n);
  CHECK(sim_peak_worker_threads() <= sim_worker_limit());
  CHECK(threads_during <= threads_before + sim_worker_limit());
  CHECK(process_threads() <= threads_before + sim_worker_limit());
}

TEST_CASE("streams waiting on a chain of events never starve the pool", "[sim][pool]") {
  // More streams than workers, each waiting on the next one's event; the last one is
  // held by a task blocked on the host. Were a waiting stream to hold a worker, the
  // workers would all wait and the chain's head would never run.
  const int n = 2 * sim_worker_limit() + 1;
  std::vector<Stream> streams;
  for (int i = 0; i < n; ++i) streams.push_back(Stream::create("sim:0"));
  std::vector<Event> events(n);
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  auto log = std::make_shared<Log>();
  launch(streams[n - 1], {"gate", {}, {}}, [opened, log, n] {
    opened.wait();
    log->add(n - 1);
  });
  events[n - 1].record(streams[n - 1]);
  for (int i = n - 2; i >= 0; --i) {
    events[i + 1].block(streams[i]);
    launch(streams[i], {"link", {}, {}}, [log, i] { log->add(i); });
    events[i].record(streams[i]);
  }
  gate.set_value();
  synchronize(Device("sim:0"));
  std::vector<int> expected;
  for (int i = n - 1; i >= 0; --i) expected.push_back(i);
  CHECK(log->seen == expected);
  CHECK(sim_peak_worker_threads() <= sim_worker_limit());
}

TEST_CASE("a worker thread that cannot start is a DeviceError and leaves nothing queued",
          "[sim][pool][errors]") {
  { SimSchedulerScope drain(deterministic(SimPolicy::kRoundRobin)); }  // ends every worker
  REQUIRE(sim_worker_threads() == 0);
  const Stream s = Stream::create("sim:0");
  auto captured = std::make_shared<int>(0);
  sim_fail_next_thread_starts(1);
  CHECK_THROWS_AS(launch(s, {"starved", {}, {}}, [captured] { ++*captured; }), DeviceError);
  CHECK(sim_queue_depth(s) == 0);
  CHECK(captured.use_count() == 1);  // the task was dropped, not kept
  s.synchronize();                   // returns: nothing is queued
  synchronize(Device("sim:0"));
  sim_fail_next_thread_starts(1);
  CHECK_THROWS_WITH(launch(s, {"starved", {}, {}}, [] {}),
                    Catch::Contains("sim:0") && Catch::Contains("worker thread") &&
                        Catch::Contains("STREAMGRAD_SIM_WORKERS"));
  // The executor is usable afterwards.
  launch(s, {"fed", {}, {}}, [captured] { ++*captured; });
  s.synchronize();
  CHECK(*captured == 1);
  CHECK(sim_worker_threads() >= 1);
}

}  // namespace
}  // namespace streamgrad

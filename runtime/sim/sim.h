// Controls of the simulated accelerator ("sim" devices): which scheduler executes the
// streams' work, and manual stepping for the deterministic one.
//
// Schedulers (DESIGN.md §3):
//   kThreaded       a bounded pool of worker threads serves every stream (each stream in
//                   order, different streams concurrently); optional seeded random delay
//                   before each launch (jitter_us) widens race windows.
//   kDeterministic  no worker threads: work runs only when the host blocks on it
//                   (synchronize, blocking copies, event synchronize) or calls
//                   sim_step() / sim_run_until_idle(). Each step runs the head task of one
//                   runnable stream chosen by `policy`:
//                     kRoundRobin   streams in creation order, in turn;
//                     kRandom       uniformly among runnable streams (seeded);
//                     kAdversarial  the stream whose next task was enqueued most recently,
//                                   so producers on other streams run as late as the
//                                   ordering rules allow and a missing wait shows up as a
//                                   wrong value.
//                   A given seed gives the same interleaving on every run. query() never
//                   runs work, so a host loop polling query() under this scheduler must
//                   call sim_step().
//
// Resources (runtime/sim/sim_executor.h has the details):
//   - each stream holds at most sim_queue_limit() tasks (STREAMGRAD_SIM_QUEUE_DEPTH); a
//     launch on a full stream blocks the host until there is room, as on a GPU. Under the
//     deterministic scheduler the blocked thread runs queued work itself instead.
//   - the threaded scheduler runs every stream on a shared pool of at most
//     sim_worker_limit() threads (STREAMGRAD_SIM_WORKERS); a stream waiting on an event
//     holds no thread. The deterministic scheduler has no worker thread.
//
// Thread-safety: all functions may be called from any thread. set_sim_scheduler first
// waits until every sim stream is idle, then ends the worker threads.
// Failure: ValueError for unknown names in parse_sim_policy / parse_sim_scheduler;
// DeviceError from a launch when no worker thread exists and none can be started (the
// work is not enqueued), and from the introspection functions for a stream that is not
// a sim stream.
#ifndef STREAMGRAD_RUNTIME_SIM_SIM_H_
#define STREAMGRAD_RUNTIME_SIM_SIM_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/stream.h"

namespace streamgrad {

enum class SimSchedulerKind { kThreaded, kDeterministic };
enum class SimPolicy { kRoundRobin, kRandom, kAdversarial };

struct SimSchedulerOptions {
  SimSchedulerKind kind = SimSchedulerKind::kThreaded;
  SimPolicy policy = SimPolicy::kRoundRobin;
  uint64_t seed = 0;
  double jitter_us = 0;  // threaded only
};

// Switches scheduler; drains all queued sim work first (with the old scheduler).
void set_sim_scheduler(const SimSchedulerOptions& options);
SimSchedulerOptions sim_scheduler();
// Deterministic scheduler: runs one task; false when nothing is runnable.
bool sim_step();
// Runs (or, threaded, waits for) all queued sim work on every device.
void sim_run_until_idle();

// Introspection, for tests and tools: tasks queued on a stream now and at most so far;
// worker threads alive now and at most so far; the configured bounds.
size_t sim_queue_depth(const Stream& stream);
size_t sim_peak_queue_depth(const Stream& stream);
size_t sim_queue_limit();
int sim_worker_threads();
int sim_peak_worker_threads();
int sim_worker_limit();
// Fault injection for tests: the next `n` worker thread starts fail as std::thread does
// when the process is out of threads (std::system_error).
void sim_fail_next_thread_starts(int n);

SimPolicy parse_sim_policy(const std::string& name);
SimSchedulerKind parse_sim_scheduler(const std::string& name);
const char* sim_policy_name(SimPolicy policy);

// Scoped scheduler change for tests: restores the previous options on exit.
class SimSchedulerScope {
 public:
  explicit SimSchedulerScope(const SimSchedulerOptions& options)
      : previous_(sim_scheduler()) {
    set_sim_scheduler(options);
  }
  ~SimSchedulerScope() { set_sim_scheduler(previous_); }
  SimSchedulerScope(const SimSchedulerScope&) = delete;
  SimSchedulerScope& operator=(const SimSchedulerScope&) = delete;

 private:
  SimSchedulerOptions previous_;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_SIM_SIM_H_

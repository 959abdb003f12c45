// Controls of the simulated accelerator ("sim" devices): which scheduler executes the
// streams' work, and manual stepping for the deterministic one.
//
// Schedulers (ARCHITECTURE.md §3):
//   kThreaded       a bounded pool of worker threads serves every stream (each stream in
//                   order, different streams concurrently); optional seeded random delay
//                   before each launch (jitter_us) widens race windows.
//   kDeterministic  no worker threads: work runs only when the host blocks on it
//                   (synchronize, blocking copies, event synchronize) or calls
//                   sim_step() / sim_run_until_idle(). Each step runs the head task of one
//                   runnable stream chosen by `policy`:
//                     kRoundRobin   streams in creation order, in turn: one interleaving
//                                   per program, whatever the seed, so a missing wait
//                                   shows only if that one interleaving breaks it;
//                     kRandom       uniformly among runnable streams (seeded): every
//                                   interleaving has a chance, but no bound on it (it can
//                                   shrink exponentially with the steps between the
//                                   tasks that must be reordered);
//                     kAdversarial  the stream whose next task was enqueued most recently.
//                                   Guarantee: a task R runs before a task W enqueued
//                                   earlier on another stream whenever R's stream reaches R
//                                   (every earlier task of it ran, its waits are met) while
//                                   W is still queued. A missing wait of R on W is therefore
//                                   a wrong value when nothing but that wait held R back.
//                                   Not otherwise: when R's stream also waits, rightly, on
//                                   a third stream, that stream's work may run only after
//                                   W (in a fork-join whose join omits the wait on the
//                                   branch forked last, that branch runs first, being the
//                                   newest work, and the join reads it complete); and a
//                                   task older than W still queued before R on R's stream
//                                   lets W's stream run first.
//                     kPct          probabilistic concurrency testing (PCT: Burckhardt,
//                                   Kothari, Musuvathi, Nagarakatte, ASPLOS 2010). Each
//                                   stream draws a random priority above d = pct_depth
//                                   when it is first given work (so idle streams change
//                                   nothing); d - 1 change points are drawn uniformly
//                                   and distinct among steps 1..k, k = pct_steps. Each step
//                                   runs the runnable stream of highest priority; the
//                                   stream that runs change point i then drops to priority
//                                   d - i, below every other stream.
//                                   Guarantee (the paper's theorem): a bug of depth d
//                                   (one that shows in every run where d given ordering
//                                   constraints between tasks hold) shows in one run with
//                                   probability at least 1 / (n * k^(d-1)), n the streams
//                                   given work, provided the run takes at most k steps;
//                                   m seeds all miss it with probability at most
//                                   (1 - 1 / (n * k^(d-1)))^m. A missing wait whose wrong
//                                   value needs only "the read ran before the write it
//                                   should have waited for" is of depth 1: pct_depth = 1
//                                   shows it with probability at least 1 / n (the
//                                   writer's stream drawn lowest: it then runs only when
//                                   no other stream can, and the read could run without
//                                   it). The bound is for depth exactly d; with a larger
//                                   depth a change point may fall before the read and
//                                   reorder it, so none is claimed for shallower bugs.
//                                   The host is not scheduled: work runs only while a
//                                   host thread waits, and a host wait ends as soon as it
//                                   is met, as if the host had the highest priority.
//                   Under every policy a step is one task (a kernel, an event record or a
//                   wait). A given seed gives the same interleaving on every run of the
//                   same program (one that launches from several host threads at once
//                   may enqueue in another order). query() never runs work, so a host
//                   loop polling query() under this scheduler must call sim_step().
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
// Failure: ValueError for unknown names in parse_sim_policy / parse_sim_scheduler, and from
// set_sim_scheduler for a pct_depth or pct_steps out of range;
// DeviceError from a launch when no worker thread exists and none can be started (the
// work is not enqueued), and from the introspection functions for a stream that is not
// a sim stream.
#ifndef STREAMGRAD_RUNTIME_SIM_SIM_H_
#define STREAMGRAD_RUNTIME_SIM_SIM_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/backend/config.h"
#include "runtime/backend/stream.h"

namespace streamgrad {

enum class SimSchedulerKind { kThreaded, kDeterministic };
enum class SimPolicy { kRoundRobin, kRandom, kAdversarial, kPct };

struct SimSchedulerOptions {
  SimSchedulerKind kind = SimSchedulerKind::kThreaded;
  SimPolicy policy = SimPolicy::kRoundRobin;
  uint64_t seed = 0;
  double jitter_us = 0;  // threaded only
  int pct_depth = kSimDefaultPctDepth;       // kPct: d, in [1, kSimMaxPctDepth]
  uint64_t pct_steps = kSimDefaultPctSteps;  // kPct: k, at least 1
};

// Switches scheduler; drains all queued sim work first (with the old scheduler).
void set_sim_scheduler(const SimSchedulerOptions& options);
SimSchedulerOptions sim_scheduler();
// Deterministic scheduler: runs one task; false when nothing is runnable.
bool sim_step();
// Runs (or, threaded, waits for) all queued sim work on every device.
void sim_run_until_idle();
// Deterministic scheduler: tasks run since the scheduler was last set (a run's k for PCT).
uint64_t sim_steps_run();

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
// For race tests (tools/missing_waits): while on, memory the sim devices hand out (a raw
// allocation, which the caching allocator makes when its cache has no fitting block; see
// empty_cache) is filled with 0xFF bytes, a NaN as float, as a GPU's fresh memory holds
// garbage. A read that overtakes its producer then sees NaN rather than an older copy of
// the same value. Off by default.
void set_sim_poison_new_memory(bool on);

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

// Controls of the simulated accelerator ("sim" devices): which scheduler executes the
// streams' work, and manual stepping for the deterministic one.
//
// Schedulers (DESIGN.md §3):
//   kThreaded       one worker thread per stream; optional seeded random delay before each
//                   launch (jitter_us) widens race windows.
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
// Thread-safety: all functions may be called from any thread. set_sim_scheduler first
// waits until every sim stream is idle.
// Failure: ValueError for unknown names in parse_sim_policy / parse_sim_scheduler.
#ifndef STREAMGRAD_RUNTIME_SIM_SIM_H_
#define STREAMGRAD_RUNTIME_SIM_SIM_H_

#include <cstdint>
#include <string>

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

// SimExecutor: the queues of every simulated stream and the two schedulers that run them.
// Internal to the sim backend (sim_backend.cc); users see runtime/sim/sim.h.
//
// One mutex guards all queues: the simulator favours an obviously correct ordering model
// over launch throughput. Tasks run with the mutex released, and are destroyed before it
// is retaken, so a task's captured state may call back into the runtime (for example an
// allocator free when the last reference to a buffer goes).
//
// Threaded scheduler: a pool of at most `max_workers` threads, started on demand, serves
// every stream. A stream is handed to one worker at a time (so it stays in order) and
// only while its head can run: a stream whose head waits on an unreached marker holds no
// thread, so waits can never starve the pool. Different streams run concurrently up to
// the pool size; a task that blocks on the host (a promise, a lock) holds its worker, so
// more than `max_workers` tasks that wait on each other would hang, as kernels that spin
// on each other do on a GPU. Workers end when the scheduler is switched, so the
// deterministic scheduler runs with no worker thread at all.
//
// Back-pressure: a launch (enqueue_work) on a stream holding `queue_depth` tasks blocks
// the host until there is room, as a GPU's launch queue does; under the deterministic
// scheduler the launching thread runs queued work itself meanwhile. Records and waits
// never block (the allocator records events while holding its lock, and tasks may free
// memory), and launches made from inside a task never block (the task would wait for
// itself); both may take a queue past the bound. This cannot deadlock on the runtime's
// own ordering: a wait names a marker already enqueued, so the streams' waits form no
// cycle and every queued task can run.
//
// Thread-safety: every method is safe from any thread.
// Failure: an exception thrown by a task is kept as its stream's error and rethrown by the
// next synchronize of that stream or device (as CUDA reports asynchronous errors). A
// worker thread that cannot be started while no other worker exists makes the enqueue
// throw DeviceError, with nothing left queued.
#ifndef STREAMGRAD_RUNTIME_SIM_SIM_EXECUTOR_H_
#define STREAMGRAD_RUNTIME_SIM_SIM_EXECUTOR_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "runtime/base/error.h"
#include "runtime/sim/sim.h"

namespace streamgrad {
namespace sim_internal {

// One record() of an event: done once every task enqueued before it on its stream ran.
struct Marker {
  bool done = false;
  std::chrono::steady_clock::time_point when;
};

struct SimLimits {
  size_t queue_depth;  // tasks per stream before a launch blocks the host
  int max_workers;     // threaded scheduler: most worker threads
};

class SimExecutor {
 public:
  using Fn = std::function<void()>;

  SimExecutor(const SimSchedulerOptions& options, const SimLimits& limits);
  SimExecutor(const SimExecutor&) = delete;
  SimExecutor& operator=(const SimExecutor&) = delete;

  // Streams are numbered per device in creation order; id 0 is created with the device.
  int add_device();
  int create_stream(int device, int priority);
  int stream_count(int device);
  int stream_priority(int device, int id);

  void enqueue_work(int device, int id, Fn fn);
  // Returns the marker that completes when the stream reaches this point.
  std::shared_ptr<Marker> enqueue_record(int device, int id);
  void enqueue_wait(int device, int id, std::shared_ptr<Marker> marker);

  bool query_stream(int device, int id);
  bool query_marker(const Marker& marker);
  // Host waits. The first two rethrow (and clear) a stored task error.
  void synchronize_stream(int device, int id);
  void synchronize_device(int device);
  void synchronize_marker(const Marker& marker);
  void synchronize_all();
  double elapsed_ms(const Marker& start, const Marker& end);

  void set_options(const SimSchedulerOptions& options);
  SimSchedulerOptions options();
  bool step();
  // Tasks the deterministic scheduler ran since the options were last set.
  uint64_t steps_run();

  // Introspection and fault injection for tests (runtime/sim/sim.h).
  size_t queue_depth(int device, int id);
  size_t peak_queue_depth(int device, int id);
  int live_workers();
  int peak_workers();
  const SimLimits& limits() const { return limits_; }
  void fail_next_thread_starts(int n);

 private:
  struct Task {
    enum class Kind : uint8_t { kWork, kRecord, kWait };
    Kind kind;
    uint64_t seq;
    Fn fn;
    std::shared_ptr<Marker> marker;
  };
  struct StreamState {
    int device;
    int id;
    int priority;
    std::deque<Task> queue;
    size_t peak_depth = 0;
    bool running = false;
    bool in_ready = false;  // threaded: listed in ready_
    std::exception_ptr error;
    std::mt19937_64 jitter_rng;
    // kPct: higher runs first. Drawn when the stream is first given a task after the
    // options were set, so that a program's streams get the same priorities whatever
    // other (idle) streams the process made before.
    double pct_priority = 0;
    bool pct_drawn = false;
  };

  StreamState& stream(int device, int id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends `task`; on a failed worker start, removes it again, drops it with mu_
  // released and throws DeviceError.
  void enqueue(std::unique_lock<std::mutex>& lk, StreamState& s, Task task);
  // Threaded: hands `s` to the pool when its head can run, or notes it as blocked on a
  // marker; starts a worker when none is free. Returns false when a worker was needed,
  // could not be started, and no other worker exists (the task would never run).
  bool schedule(StreamState& s, std::string* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool start_worker(std::string* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends every worker; the caller has drained all queues.
  void retire_workers(std::unique_lock<std::mutex>& lk);
  bool runnable(const StreamState& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool idle(const StreamState& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StreamState* pick() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pops and runs the head of `s`; releases mu_ while a work task runs.
  void run_head(std::unique_lock<std::mutex>& lk, StreamState& s, bool with_jitter);
  // Blocks until pred() holds, running work itself under the deterministic scheduler.
  template <typename Pred>
  void wait_until(std::unique_lock<std::mutex>& lk, Pred pred);
  void worker_loop();
  void reseed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kPct: a stream's initial priority, uniform in [depth, depth + 1) and independent of
  // the others', so that the streams' order is a uniformly random permutation.
  double draw_pct_priority() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StreamState* pick_pct() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a record completed: schedules the blocked streams whose marker is now done.
  void wake_waiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void rethrow_error(StreamState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SimLimits limits_;
  std::mutex mu_;
  // Host waiters (synchronize, step, a launch on a full queue): notified whenever a task
  // finishes. Workers sleep on pool_cv_, so a launch wakes one thread, not all of them.
  std::condition_variable host_cv_;
  std::condition_variable pool_cv_;
  std::deque<StreamState*> ready_ ABSL_GUARDED_BY(mu_);  // runnable, not held by a worker
  std::unordered_set<StreamState*> blocked_ ABSL_GUARDED_BY(mu_);  // head waits on a marker
  int live_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int idle_workers_ ABSL_GUARDED_BY(mu_) = 0;  // waiting on pool_cv_
  int busy_workers_ ABSL_GUARDED_BY(mu_) = 0;  // holding a stream
  int peak_workers_ ABSL_GUARDED_BY(mu_) = 0;
  bool retiring_ ABSL_GUARDED_BY(mu_) = false;
  int space_waiters_ ABSL_GUARDED_BY(mu_) = 0;  // launches blocked on a full queue
  int fail_thread_starts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<StreamState>> all_ ABSL_GUARDED_BY(mu_);  // creation order
  std::vector<std::vector<StreamState*>> devices_ ABSL_GUARDED_BY(mu_);
  SimSchedulerOptions options_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool det_running_ ABSL_GUARDED_BY(mu_) = false;  // a host thread is running a task
  size_t rr_cursor_ ABSL_GUARDED_BY(mu_) = 0;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  uint64_t steps_ ABSL_GUARDED_BY(mu_) = 0;  // deterministic: tasks run since reseed()
  // kPct: its own generator (the other policies' sequences stay as they were), and the
  // change points, ascending; pct_next_change_ indexes the next one to reach.
  std::mt19937_64 pct_rng_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> pct_changes_ ABSL_GUARDED_BY(mu_);
  size_t pct_next_change_ ABSL_GUARDED_BY(mu_) = 0;
};

// The scheduler options STREAMGRAD_SIM_SCHEDULER, _POLICY, _SEED, _JITTER_US, _PCT_DEPTH
// and _PCT_STEPS ask for (runtime/backend/config.h), as every executor starts: the sim
// backend's and the interpreted CUDA device's. Throws ValueError for a malformed setting.
SimSchedulerOptions options_from_config();

// Implementation details follow.

// A host wait: under the deterministic scheduler the waiting thread runs queued work
// itself until `pred` holds (no worker threads exist there).
template <typename Pred>
void SimExecutor::wait_until(std::unique_lock<std::mutex>& lk, Pred pred) {
  while (!pred()) {
    if (options_.kind == SimSchedulerKind::kThreaded || det_running_) {
      host_cv_.wait(lk);
      continue;
    }
    StreamState* s = pick();
    SG_INTERNAL_CHECK(s != nullptr, "deterministic sim scheduler: a host wait cannot make ",
                      "progress (no runnable stream)");
    run_head(lk, *s, /*with_jitter=*/false);
  }
}

}  // namespace sim_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_SIM_SIM_EXECUTOR_H_

// SimExecutor: the queues of every simulated stream and the two schedulers that run them.
// Internal to the sim backend (sim_backend.cc); users see runtime/sim/sim.h.
//
// One mutex guards all queues: the simulator favours an obviously correct ordering model
// over launch throughput; each worker sleeps on its own condition variable. Tasks run with the mutex released, and are destroyed before
// it is retaken, so a task's captured state may call back into the runtime (for example
// an allocator free when the last reference to a buffer goes).
//
// Thread-safety: every method is safe from any thread.
// Failure: an exception thrown by a task is kept as its stream's error and rethrown by the
// next synchronize of that stream or device (as CUDA reports asynchronous errors).
#ifndef STREAMGRAD_RUNTIME_SIM_SIM_EXECUTOR_H_
#define STREAMGRAD_RUNTIME_SIM_SIM_EXECUTOR_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "runtime/sim/sim.h"

namespace streamgrad {
namespace sim_internal {

// One record() of an event: done once every task enqueued before it on its stream ran.
struct Marker {
  bool done = false;
  std::chrono::steady_clock::time_point when;
};

class SimExecutor {
 public:
  using Fn = std::function<void()>;

  explicit SimExecutor(const SimSchedulerOptions& options);
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
    bool running = false;
    std::exception_ptr error;
    std::unique_ptr<std::thread> worker;
    std::condition_variable wake;  // this stream's worker: work arrived or a wait resolved
    std::mt19937_64 jitter_rng;
  };

  StreamState& stream(int device, int id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void enqueue(StreamState& s, Task task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool runnable(const StreamState& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool idle(const StreamState& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StreamState* pick() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pops and runs the head of `s`; releases mu_ while a work task runs.
  void run_head(std::unique_lock<std::mutex>& lk, StreamState& s, bool with_jitter);
  // Blocks until pred() holds, running work itself under the deterministic scheduler.
  template <typename Pred>
  void wait_until(std::unique_lock<std::mutex>& lk, Pred pred);
  void worker_loop(StreamState* s);
  void reseed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a record completed: wakes the workers whose head waits on a marker.
  void wake_waiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void rethrow_error(StreamState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::mutex mu_;
  // Host waiters (synchronize, step): notified whenever a task finishes. Workers have their
  // own condition variable, so a launch wakes one thread, not every stream's worker.
  std::condition_variable host_cv_;
  std::vector<std::unique_ptr<StreamState>> all_ ABSL_GUARDED_BY(mu_);  // creation order
  std::vector<std::vector<StreamState*>> devices_ ABSL_GUARDED_BY(mu_);
  SimSchedulerOptions options_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool det_running_ ABSL_GUARDED_BY(mu_) = false;  // a host thread is running a task
  size_t rr_cursor_ ABSL_GUARDED_BY(mu_) = 0;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sim_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_SIM_SIM_EXECUTOR_H_

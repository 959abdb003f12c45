// The sim executor's host side: queries, host synchronisation (which, under the
// deterministic scheduler, runs queued work until the awaited task is done), scheduler
// options, stepping and introspection (sim_executor.h). Queues, workers and the
// scheduling policy are in sim_executor.cc.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"
#include "runtime/sim/sim_executor.h"

namespace streamgrad {
namespace sim_internal {

bool SimExecutor::query_stream(int device, int id) {
  std::lock_guard<std::mutex> lk(mu_);
  return idle(stream(device, id));
}

bool SimExecutor::query_marker(const Marker& marker) {
  std::lock_guard<std::mutex> lk(mu_);
  return marker.done;
}

void SimExecutor::rethrow_error(StreamState& s) {
  if (s.error) {
    std::exception_ptr e = s.error;
    s.error = nullptr;
    std::rethrow_exception(e);
  }
}

void SimExecutor::synchronize_stream(int device, int id) {
  std::unique_lock<std::mutex> lk(mu_);
  StreamState& s = stream(device, id);
  wait_until(lk, [&] { return idle(s); });
  rethrow_error(s);
}

void SimExecutor::synchronize_device(int device) {
  std::unique_lock<std::mutex> lk(mu_);
  const auto& streams = devices_[device];
  wait_until(lk, [&] {
    for (StreamState* s : streams) {
      if (!idle(*s)) return false;
    }
    return true;
  });
  for (StreamState* s : streams) rethrow_error(*s);
}

void SimExecutor::synchronize_marker(const Marker& marker) {
  std::unique_lock<std::mutex> lk(mu_);
  wait_until(lk, [&] { return marker.done; });
}

void SimExecutor::synchronize_all() {
  std::unique_lock<std::mutex> lk(mu_);
  wait_until(lk, [&] {
    for (auto& s : all_) {
      if (!idle(*s)) return false;
    }
    return true;
  });
}

double SimExecutor::elapsed_ms(const Marker& start, const Marker& end) {
  std::lock_guard<std::mutex> lk(mu_);
  SG_CHECK(start.done && end.done, Error, "Event::elapsed_ms: events have not completed");
  return std::chrono::duration<double, std::milli>(end.when - start.when).count();
}

void SimExecutor::set_options(const SimSchedulerOptions& options) {
  SG_CHECK(options.jitter_us >= 0, ValueError, "set_sim_scheduler: jitter_us must be >= 0, got ",
           options.jitter_us);
  SG_CHECK(options.pct_depth >= 1 && options.pct_depth <= kSimMaxPctDepth, ValueError,
           "set_sim_scheduler: pct_depth must be in [1, ", kSimMaxPctDepth, "], got ",
           options.pct_depth, " (the number of ordering constraints a bug needs; 1 to 3 ",
           "covers missing waits)");
  SG_CHECK(options.pct_steps >= 1, ValueError,
           "set_sim_scheduler: pct_steps must be at least 1 (about the tasks a run takes; "
           "sim_steps_run() counts them)");
  std::unique_lock<std::mutex> lk(mu_);
  wait_until(lk, [&] {
    for (auto& s : all_) {
      if (!idle(*s)) return false;
    }
    return true;
  });
  retire_workers(lk);  // the deterministic scheduler has none; a threaded one restarts them
  options_ = options;
  reseed();
  host_cv_.notify_all();
}

SimSchedulerOptions SimExecutor::options() {
  std::lock_guard<std::mutex> lk(mu_);
  return options_;
}

bool SimExecutor::step() {
  std::unique_lock<std::mutex> lk(mu_);
  if (options_.kind != SimSchedulerKind::kDeterministic) return false;
  host_cv_.wait(lk, [&] { return !det_running_; });
  StreamState* s = pick();
  if (s == nullptr) return false;
  run_head(lk, *s, false);
  return true;
}

size_t SimExecutor::queue_depth(int device, int id) {
  std::lock_guard<std::mutex> lk(mu_);
  return stream(device, id).queue.size();
}

size_t SimExecutor::peak_queue_depth(int device, int id) {
  std::lock_guard<std::mutex> lk(mu_);
  return stream(device, id).peak_depth;
}

int SimExecutor::live_workers() {
  std::lock_guard<std::mutex> lk(mu_);
  return live_workers_;
}

int SimExecutor::peak_workers() {
  std::lock_guard<std::mutex> lk(mu_);
  return peak_workers_;
}

void SimExecutor::fail_next_thread_starts(int n) {
  std::lock_guard<std::mutex> lk(mu_);
  fail_thread_starts_ = n;
}

uint64_t SimExecutor::steps_run() {
  std::lock_guard<std::mutex> lk(mu_);
  return steps_;
}

void SimExecutor::reseed() {
  rng_.seed(options_.seed);
  rr_cursor_ = 0;
  steps_ = 0;
  for (auto& s : all_) s->jitter_rng.seed(options_.seed * 1000003u + s->device * 1009u + s->id);
  // PCT: d - 1 distinct change points in [1, k]; each stream draws its priority when it
  // is next given a task (enqueue).
  pct_rng_.seed(options_.seed);
  for (auto& s : all_) s->pct_drawn = false;
  pct_changes_.clear();
  pct_next_change_ = 0;
  const uint64_t wanted = std::min<uint64_t>(static_cast<uint64_t>(options_.pct_depth - 1),
                                             options_.pct_steps);
  std::uniform_int_distribution<uint64_t> step(1, options_.pct_steps);
  while (pct_changes_.size() < wanted) {
    const uint64_t c = step(pct_rng_);
    if (std::find(pct_changes_.begin(), pct_changes_.end(), c) == pct_changes_.end()) {
      pct_changes_.push_back(c);
    }
  }
  std::sort(pct_changes_.begin(), pct_changes_.end());
}
}  // namespace sim_internal
}  // namespace streamgrad

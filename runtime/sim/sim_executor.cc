#include "runtime/sim/sim_executor.h"

#include <algorithm>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace sim_internal {
namespace {
// Set while this thread runs a task (and drops its captured state): a launch from there
// must not wait for queue space, since its own stream may be the one that is full.
thread_local bool t_in_task = false;
}  // namespace

SimExecutor::SimExecutor(const SimSchedulerOptions& options, const SimLimits& limits)
    : limits_(limits), options_(options) {
  std::lock_guard<std::mutex> lk(mu_);
  reseed();
}

int SimExecutor::add_device() {
  std::lock_guard<std::mutex> lk(mu_);
  devices_.emplace_back();
  const int device = static_cast<int>(devices_.size()) - 1;
  auto s = std::make_unique<StreamState>();
  s->device = device;
  s->id = 0;
  s->priority = 0;
  s->jitter_rng.seed(options_.seed * 1000003u + device * 1009u);
  devices_[device].push_back(s.get());
  all_.push_back(std::move(s));
  return device;
}

int SimExecutor::create_stream(int device, int priority) {
  std::lock_guard<std::mutex> lk(mu_);
  auto s = std::make_unique<StreamState>();
  s->device = device;
  s->id = static_cast<int>(devices_[device].size());
  s->priority = priority;
  s->jitter_rng.seed(options_.seed * 1000003u + device * 1009u + s->id);
  devices_[device].push_back(s.get());
  all_.push_back(std::move(s));
  return all_.back()->id;
}

int SimExecutor::stream_count(int device) {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int>(devices_[device].size());
}

int SimExecutor::stream_priority(int device, int id) {
  std::lock_guard<std::mutex> lk(mu_);
  return stream(device, id).priority;
}

SimExecutor::StreamState& SimExecutor::stream(int device, int id) {
  SG_INTERNAL_CHECK(device >= 0 && device < static_cast<int>(devices_.size()) && id >= 0 &&
                        id < static_cast<int>(devices_[device].size()),
                    "sim stream ", device, "/", id);
  return *devices_[device][id];
}

void SimExecutor::enqueue(std::unique_lock<std::mutex>& lk, StreamState& s, Task task) {
  task.seq = next_seq_++;
  if (!s.pct_drawn) {
    s.pct_priority = draw_pct_priority();
    s.pct_drawn = true;
  }
  s.queue.push_back(std::move(task));
  s.peak_depth = std::max(s.peak_depth, s.queue.size());
  std::string why;
  if (schedule(s, &why)) return;
  // No worker exists to run it: take the task back rather than leave it queued forever.
  // A worker is started only for a stream that just became runnable, so the task is the
  // stream's only one and the stream is the last entry of ready_.
  Task dropped = std::move(s.queue.back());
  s.queue.pop_back();
  if (s.in_ready) {
    ready_.erase(std::find(ready_.begin(), ready_.end(), &s));
    s.in_ready = false;
  }
  const int device = s.device;
  const int id = s.id;
  lk.unlock();
  dropped = Task{};  // captured state may call back into the runtime: drop it unlocked
  throw DeviceError(absl::StrCat(
      "sim:", device, " stream ", id, ": cannot start a worker thread for the simulated "
      "device (", why, "); the work was not enqueued. The process is out of threads: "
      "lower STREAMGRAD_SIM_WORKERS or the number of threads the program starts"));
}

bool SimExecutor::schedule(StreamState& s, std::string* why) {
  if (options_.kind != SimSchedulerKind::kThreaded || s.running || s.in_ready ||
      s.queue.empty()) {
    return true;
  }
  const Task& head = s.queue.front();
  if (head.kind == Task::Kind::kWait && !head.marker->done) {
    blocked_.insert(&s);  // holds no worker until wake_waiters() sees its marker done
    return true;
  }
  ready_.push_back(&s);
  s.in_ready = true;
  if (idle_workers_ > 0) pool_cv_.notify_one();
  const size_t free_workers = static_cast<size_t>(live_workers_ - busy_workers_);
  if (ready_.size() <= free_workers || live_workers_ >= limits_.max_workers) return true;
  return start_worker(why) || live_workers_ > 0;
}

bool SimExecutor::start_worker(std::string* why) {
  try {
    if (fail_thread_starts_ > 0) {
      --fail_thread_starts_;
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "simulated thread start failure");
    }
    // Workers end only through retire_workers(), which waits for them under mu_, so they
    // are detached rather than joined.
    std::thread(&SimExecutor::worker_loop, this).detach();
  } catch (const std::system_error& e) {
    *why = e.what();
    return false;
  }
  ++live_workers_;
  peak_workers_ = std::max(peak_workers_, live_workers_);
  return true;
}

void SimExecutor::retire_workers(std::unique_lock<std::mutex>& lk) {
  retiring_ = true;
  pool_cv_.notify_all();
  host_cv_.wait(lk, [&] { return live_workers_ == 0; });
  retiring_ = false;
}

void SimExecutor::enqueue_work(int device, int id, Fn fn) {
  std::unique_lock<std::mutex> lk(mu_);
  StreamState& s = stream(device, id);
  if (!t_in_task && s.queue.size() >= limits_.queue_depth) {
    ++space_waiters_;
    wait_until(lk, [&] { return s.queue.size() < limits_.queue_depth; });
    --space_waiters_;
  }
  enqueue(lk, s, Task{Task::Kind::kWork, 0, std::move(fn), nullptr});
}

std::shared_ptr<Marker> SimExecutor::enqueue_record(int device, int id) {
  auto marker = std::make_shared<Marker>();
  std::unique_lock<std::mutex> lk(mu_);
  enqueue(lk, stream(device, id), Task{Task::Kind::kRecord, 0, nullptr, marker});
  return marker;
}

void SimExecutor::enqueue_wait(int device, int id, std::shared_ptr<Marker> marker) {
  std::unique_lock<std::mutex> lk(mu_);
  if (marker->done) return;  // nothing left to wait for
  enqueue(lk, stream(device, id), Task{Task::Kind::kWait, 0, nullptr, std::move(marker)});
}

bool SimExecutor::runnable(const StreamState& s) const {
  if (s.running || s.queue.empty()) return false;
  const Task& head = s.queue.front();
  return head.kind != Task::Kind::kWait || head.marker->done;
}

bool SimExecutor::idle(const StreamState& s) const { return !s.running && s.queue.empty(); }

SimExecutor::StreamState* SimExecutor::pick() {
  const size_t n = all_.size();
  switch (options_.policy) {
    case SimPolicy::kRoundRobin:
      for (size_t k = 0; k < n; ++k) {
        const size_t i = (rr_cursor_ + k) % n;
        if (runnable(*all_[i])) {
          rr_cursor_ = i + 1;
          return all_[i].get();
        }
      }
      return nullptr;
    case SimPolicy::kRandom: {
      std::vector<StreamState*> candidates;
      for (auto& s : all_) {
        if (runnable(*s)) candidates.push_back(s.get());
      }
      if (candidates.empty()) return nullptr;
      return candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng_)];
    }
    case SimPolicy::kAdversarial: {
      StreamState* best = nullptr;
      for (auto& s : all_) {
        if (runnable(*s) && (best == nullptr || s->queue.front().seq > best->queue.front().seq)) {
          best = s.get();
        }
      }
      return best;
    }
    case SimPolicy::kPct:
      return pick_pct();
  }
  return nullptr;
}

SimExecutor::StreamState* SimExecutor::pick_pct() {
  StreamState* best = nullptr;
  for (auto& s : all_) {
    if (runnable(*s) && (best == nullptr || s->pct_priority > best->pct_priority)) {
      best = s.get();
    }
  }
  if (best == nullptr) return nullptr;
  // The caller runs `best` as step steps_ + 1 (counted in run_head); at a change point it
  // runs that step, then yields to every other stream.
  const uint64_t step = steps_ + 1;
  if (pct_next_change_ < pct_changes_.size() && pct_changes_[pct_next_change_] == step) {
    ++pct_next_change_;
    best->pct_priority =
        static_cast<double>(options_.pct_depth) - static_cast<double>(pct_next_change_);
  }
  return best;
}

double SimExecutor::draw_pct_priority() {
  return options_.pct_depth + std::uniform_real_distribution<double>(0, 1)(pct_rng_);
}

void SimExecutor::run_head(std::unique_lock<std::mutex>& lk, StreamState& s, bool with_jitter) {
  Task task = std::move(s.queue.front());
  s.queue.pop_front();
  // A slot is free from the moment the task leaves the queue, as a GPU's launch queue
  // frees one when the kernel starts, not when it ends.
  if (space_waiters_ > 0) host_cv_.notify_all();
  if (options_.kind == SimSchedulerKind::kDeterministic) ++steps_;
  if (task.kind == Task::Kind::kRecord) {
    task.marker->when = std::chrono::steady_clock::now();
    task.marker->done = true;
  } else if (task.kind == Task::Kind::kWork) {
    const bool deterministic = options_.kind == SimSchedulerKind::kDeterministic;
    double delay_us = 0;
    if (with_jitter) {
      delay_us = std::uniform_real_distribution<double>(0, options_.jitter_us)(s.jitter_rng);
    }
    s.running = true;
    if (deterministic) det_running_ = true;
    const bool was_in_task = t_in_task;
    t_in_task = true;
    lk.unlock();
    if (delay_us > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(delay_us));
    }
    std::exception_ptr error;
    try {
      task.fn();
    } catch (...) {
      error = std::current_exception();
    }
    task.fn = nullptr;  // captured state may call back into the runtime: drop it unlocked
    t_in_task = was_in_task;
    lk.lock();
    if (error && !s.error) s.error = error;
    s.running = false;
    if (deterministic) det_running_ = false;
  }
  if (task.kind == Task::Kind::kRecord) wake_waiters();
  host_cv_.notify_all();
}

void SimExecutor::wake_waiters() {
  for (auto it = blocked_.begin(); it != blocked_.end();) {
    StreamState* st = *it;
    if (!st->queue.front().marker->done) {
      ++it;
      continue;
    }
    it = blocked_.erase(it);
    std::string why;
    schedule(*st, &why);  // runs on a worker, so a failed start leaves the pool non-empty
  }
}

void SimExecutor::worker_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (ready_.empty()) {
      if (retiring_) break;
      ++idle_workers_;
      pool_cv_.wait(lk);
      --idle_workers_;
      continue;
    }
    StreamState* s = ready_.front();
    ready_.pop_front();
    s->in_ready = false;
    ++busy_workers_;
    run_head(lk, *s, options_.jitter_us > 0);
    --busy_workers_;  // counted free again before re-listing s, which it may take itself
    std::string why;
    schedule(*s, &why);
  }
  --live_workers_;
  host_cv_.notify_all();
}

}  // namespace sim_internal
}  // namespace streamgrad

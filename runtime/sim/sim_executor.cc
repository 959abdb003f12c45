#include "runtime/sim/sim_executor.h"

#include "absl/strings/str_cat.h"
#include "runtime/error.h"

namespace streamgrad {
namespace sim_internal {

SimExecutor::SimExecutor(const SimSchedulerOptions& options) : options_(options) {
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

void SimExecutor::enqueue(StreamState& s, Task task) {
  task.seq = next_seq_++;
  s.queue.push_back(std::move(task));
  if (options_.kind == SimSchedulerKind::kThreaded && !s.worker) {
    // Workers live as long as the process (the backend is never destroyed), so they are
    // detached rather than joined.
    s.worker = std::make_unique<std::thread>(&SimExecutor::worker_loop, this, &s);
    s.worker->detach();
  }
  s.wake.notify_one();
}

void SimExecutor::enqueue_work(int device, int id, Fn fn) {
  std::lock_guard<std::mutex> lk(mu_);
  enqueue(stream(device, id), Task{Task::Kind::kWork, 0, std::move(fn), nullptr});
}

std::shared_ptr<Marker> SimExecutor::enqueue_record(int device, int id) {
  auto marker = std::make_shared<Marker>();
  std::lock_guard<std::mutex> lk(mu_);
  enqueue(stream(device, id), Task{Task::Kind::kRecord, 0, nullptr, marker});
  return marker;
}

void SimExecutor::enqueue_wait(int device, int id, std::shared_ptr<Marker> marker) {
  std::lock_guard<std::mutex> lk(mu_);
  if (marker->done) return;  // nothing left to wait for
  enqueue(stream(device, id), Task{Task::Kind::kWait, 0, nullptr, std::move(marker)});
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
  }
  return nullptr;
}

void SimExecutor::run_head(std::unique_lock<std::mutex>& lk, StreamState& s, bool with_jitter) {
  Task task = std::move(s.queue.front());
  s.queue.pop_front();
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
    lk.lock();
    if (error && !s.error) s.error = error;
    s.running = false;
    if (deterministic) det_running_ = false;
  }
  if (task.kind == Task::Kind::kRecord) wake_waiters();
  host_cv_.notify_all();
}

void SimExecutor::wake_waiters() {
  for (auto& st : all_) {
    if (!st->queue.empty() && st->queue.front().kind == Task::Kind::kWait) st->wake.notify_one();
  }
}

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

void SimExecutor::worker_loop(StreamState* s) {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    s->wake.wait(lk, [&] { return options_.kind == SimSchedulerKind::kThreaded && runnable(*s); });
    run_head(lk, *s, options_.jitter_us > 0);
  }
}

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
  std::unique_lock<std::mutex> lk(mu_);
  wait_until(lk, [&] {
    for (auto& s : all_) {
      if (!idle(*s)) return false;
    }
    return true;
  });
  options_ = options;
  reseed();
  for (auto& st : all_) st->wake.notify_one();
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

void SimExecutor::reseed() {
  rng_.seed(options_.seed);
  rr_cursor_ = 0;
  for (auto& s : all_) s->jitter_rng.seed(options_.seed * 1000003u + s->device * 1009u + s->id);
}

}  // namespace sim_internal
}  // namespace streamgrad

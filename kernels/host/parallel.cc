#include "kernels/host/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif

#include "absl/base/thread_annotations.h"
#include "runtime/backend/cpu_settings.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// Set while this thread runs a chunk: a parallel_for inside it runs inline.
thread_local bool t_in_chunk = false;

// Times a worker found nothing queued after spinning and went to sleep (worker_sleeps()).
std::atomic<int64_t> g_worker_sleeps{0};

// How long an idle worker, and a caller waiting for the last chunks, spins before it
// sleeps: get_thread_spin_us() (runtime/backend/cpu_settings.h). On these virtual machines
// a sleeping thread takes tens of microseconds to wake (the host must run its virtual CPU
// again), as long as a whole element-wise kernel of 256K floats: with sleeping workers,
// two threads ran the exact GELU forward in 0.077-0.097 ms against about 0.10 on one;
// spinning, in 0.052-0.056 (bench/RESULTS.md). At times waking costs far more: a
// two-thread ResNet step, whose worker then waited up to ~3 ms between kernels, took
// 150-274 ms with 200 us of spin and 108-112 with 2 ms, in the same minutes
// (bench/RESULTS.md). Never while there are more threads than processors: a spinning
// thread would then hold a processor another needs (OpenMP's libgomp limits its spinning
// there too).
bool may_spin() {
  static const unsigned processors = std::thread::hardware_concurrency();
  return processors > 0 && static_cast<unsigned>(get_num_threads()) <= processors;
}

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until ready() or for the spin time, where spinning is allowed; returns ready().
template <typename Ready>
bool spin_until(Ready&& ready) {
  const int spin_us = get_thread_spin_us();
  if (spin_us == 0 || !may_spin()) return ready();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

// One parallel_for: chunks [begin + c * chunk, ...) for c < count, claimed through `next`.
struct Job {
  int64_t begin = 0, end = 0, chunk = 0, count = 0;
  detail::ChunkFn fn = nullptr;
  void* ctx = nullptr;
  int caller_cpu = -1;  // where the caller ran when it queued the job
  std::atomic<int64_t> next{0};
  // Workers that may still join; the pool's lock guards it.
  int open_slots = 0;

  std::mutex mu;
  std::condition_variable finished;
  int64_t done ABSL_GUARDED_BY(mu) = 0;
  std::atomic<int64_t> done_seen{0};
  std::exception_ptr error ABSL_GUARDED_BY(mu);
};

// Claims and runs chunks of `job` until none is left. A worker that arrives after the
// last claim runs nothing and never touches fn or ctx, which may be gone by then.
void work(Job& job) {
  const bool outer = t_in_chunk;
  t_in_chunk = true;
  int64_t ran = 0;
  std::exception_ptr error;
  for (;;) {
    const int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.count) break;
    const int64_t b = job.begin + c * job.chunk;
    try {
      job.fn(job.ctx, b, std::min(job.end, b + job.chunk));
    } catch (...) {
      if (!error) error = std::current_exception();
    }
    ++ran;
  }
  t_in_chunk = outer;
  if (ran == 0) return;
  std::lock_guard<std::mutex> lk(job.mu);
  job.done += ran;
  job.done_seen.store(job.done, std::memory_order_release);
  // This thread lets go of the exception under the lock, and the caller takes it out of
  // the job (rethrow_error), so the caller always drops the last reference. Dropped here
  // after the lock, the two releases were ordered only by libstdc++'s reference count,
  // which ThreadSanitizer cannot see: it reported the caller's read of what() and this
  // thread's delete as a race (parallel_test, now and then).
  if (error && !job.error) job.error = std::move(error);
  error = nullptr;
  if (job.done == job.count) job.finished.notify_all();
}

// Rethrows the job's exception, if any, taking it out of the job (see work()).
void rethrow_error(Job& job, std::unique_lock<std::mutex>& lk) {
  const std::exception_ptr error = std::exchange(job.error, nullptr);
  lk.unlock();
  if (error) std::rethrow_exception(error);
}

class Pool {
 public:
  void run(const std::shared_ptr<Job>& job, int helpers) {
    bool stopped;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopped = stopped_;
      if (!stopped) {
        start_workers(helpers);
        job->open_slots = helpers;
        queue_.push_back(job);
        queued_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
      }
    }
    if (stopped) {
      // After exit began: the caller does everything.
      work(*job);
    } else {
      wake_.notify_all();
      work(*job);
      std::lock_guard<std::mutex> lk(mu_);
      // All chunks are claimed: workers that have not joined yet need not.
      auto it = std::find(queue_.begin(), queue_.end(), job);
      if (it != queue_.end()) queue_.erase(it);
      queued_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
    }
    spin_until([&] { return job->done_seen.load(std::memory_order_acquire) == job->count; });
    std::unique_lock<std::mutex> lk(job->mu);
    job->finished.wait(lk, [&] { return job->done == job->count; });
    rethrow_error(*job, lk);
  }

  // Lets the workers finish what is queued, then joins them.
  void shutdown() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopped_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

 private:
  void start_workers(int n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (static_cast<int>(workers_.size()) < n) {
      try {
        workers_.emplace_back([this] { worker_loop(); });
      } catch (const std::system_error&) {
        return;  // no more threads: the callers and existing workers do the work
      }
    }
  }

  void worker_loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      if (!spin_until([&] { return queued_.load(std::memory_order_relaxed) > 0; })) {
        g_worker_sleeps.fetch_add(1, std::memory_order_relaxed);
      }
      {
        std::unique_lock<std::mutex> lk(mu_);
        wake_.wait(lk, [&] { return stopped_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopped, nothing left
        job = queue_.front();
        if (--job->open_slots <= 0) queue_.pop_front();
        queued_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
      }
      // A worker woken onto its caller's processor would take turns with the caller there
      // while the other processor idles: on these virtual machines the guest kernel packs
      // threads that look idle onto one processor (sched_vcpu_pack), and in most short
      // processes caller and worker stayed packed (bench/RESULTS.md). So it moves off.
      if (may_spin() && job->caller_cpu >= 0 && detail::current_cpu() == job->caller_cpu) {
        detail::move_off(job->caller_cpu);
      }
      work(*job);
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> queued_{0};  // queue_.size(), for spinning workers
  std::vector<std::thread> workers_;  // changed under mu_; joined by shutdown alone
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

Pool& pool() {
  // Never deleted, so a kernel still running on a sim worker during exit finds a pool
  // (stopped: it runs inline); the workers themselves are joined at exit.
  static Pool* const p = new Pool();
  static const struct Joiner {
    ~Joiner() { p->shutdown(); }
  } joiner;
  (void)joiner;
  return *p;
}

}  // namespace

namespace detail {

int move_off(int cpu) {
#if defined(__linux__)
  if (cpu < 0) return -1;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return -1;
  cpu_set_t others = allowed;
  CPU_CLR(cpu, &others);
  if (CPU_COUNT(&others) == 0) return -1;
  // The kernel moves a thread onto its new set before the call returns; given its whole
  // set back, the thread stays where it now runs until the scheduler moves it.
  if (sched_setaffinity(0, sizeof(others), &others) != 0) return -1;
  const int now = sched_getcpu();
  sched_setaffinity(0, sizeof(allowed), &allowed);
  return now;
#else
  (void)cpu;
  return -1;
#endif
}

int64_t worker_sleeps() { return g_worker_sleeps.load(std::memory_order_relaxed); }

int current_cpu() {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

int64_t chunk_size(int64_t n, int64_t grain, int64_t threads) {
  // An equal share for every thread, or two, three or four shares each while they still
  // hold a grain (so that a thread that lost its core to another process does not hold
  // everyone up). Cutting in whole grains instead left ReLU over [64, 16, 28, 28] (3.1
  // grains) in chunks of 2 grains and 1.1 on two threads.
  const int64_t per_thread = std::min<int64_t>(4, std::max<int64_t>(1, n / (grain * threads)));
  const int64_t count = threads * per_thread;
  int64_t chunk = (n + count - 1) / count;
  // Large chunks start on a multiple of 64 items, so that two threads' outputs never share
  // a cache line.
  if (chunk >= kAlignFrom) chunk = (chunk + kAlignItems - 1) / kAlignItems * kAlignItems;
  return chunk;
}

bool should_split(int64_t begin, int64_t end, int64_t grain) {
  return end - begin > grain && !t_in_chunk && get_num_threads() > 1;
}

void run_parallel(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* ctx) {
  grain = std::max<int64_t>(1, grain);
  const int64_t threads = get_num_threads();
  const int64_t n = end - begin;
  const int64_t chunk = detail::chunk_size(n, grain, threads);
  auto job = std::make_shared<Job>();
  job->begin = begin;
  job->end = end;
  job->chunk = chunk;
  job->count = (n + chunk - 1) / chunk;
  job->fn = fn;
  job->ctx = ctx;
  const int helpers = static_cast<int>(std::min<int64_t>(threads - 1, job->count - 1));
  if (helpers <= 0) {
    work(*job);
    std::unique_lock<std::mutex> lk(job->mu);
    rethrow_error(*job, lk);
    return;
  }
  job->caller_cpu = detail::current_cpu();
  pool().run(job, helpers);
}

}  // namespace detail

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

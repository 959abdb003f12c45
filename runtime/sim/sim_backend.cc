// The simulated accelerator backend: N devices whose memory is host memory and whose
// streams run asynchronously under SimExecutor. See runtime/sim/sim.h for its controls.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/config.h"
#include "runtime/backend/observer.h"
#include "runtime/base/error.h"
#include "runtime/sim/sim.h"
#include "runtime/sim/sim_executor.h"

namespace streamgrad {
namespace {

using sim_internal::Marker;
using sim_internal::SimExecutor;

constexpr size_t kAlignment = 256;  // as cudaMalloc guarantees

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

class SimEvent final : public BackendEvent {
 public:
  SimEvent(int device, bool timing) : device(device), timing(timing) {}
  const int device;
  const bool timing;
  std::shared_ptr<Marker> latest;  // the most recent record(); null: never recorded
};

SimExecutor* g_drained_at_exit = nullptr;  // the (never destroyed) backend's executor
std::atomic<bool> g_poison_new_memory{false};

// At exit, waits (at most 10 s) until the threaded scheduler's streams are idle, so that no
// worker is inside a kernel while exit tears libraries down: OpenBLAS frees its buffers in
// a destructor, and a dgemm still running on a worker crashed there. The deterministic
// scheduler has no workers. An exit() from inside a task waits out the limit and goes on.
void drain_before_exit() {
  SimExecutor& exec = *g_drained_at_exit;
  if (exec.options().kind != SimSchedulerKind::kThreaded) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int d = 0; d < static_cast<int>(config().sim_visible.size()); ++d) {
    for (int id = 0; id < exec.stream_count(d); ++id) {
      while (!exec.query_stream(d, id) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
}

class SimBackend final : public Backend {
 public:
  SimBackend()
      : exec_(sim_internal::options_from_config(),
              {static_cast<size_t>(config().sim_queue_depth), config().sim_workers}),
        physical_(config().sim_visible) {
    memory_.resize(physical_.size());
    for (size_t i = 0; i < physical_.size(); ++i) exec_.add_device();
    // Registered after the libraries' constructors ran, so it runs before their
    // destructors (which _dl_fini calls after every atexit handler).
    g_drained_at_exit = &exec_;
    std::atexit(&drain_before_exit);
  }

  SimExecutor& executor() { return exec_; }

  DeviceType type() const noexcept override { return DeviceType::kSim; }
  int device_count() const noexcept override { return static_cast<int>(physical_.size()); }
  std::string device_name(int index) const override {
    return absl::StrCat("simulated accelerator (physical ", physical_[index], ")");
  }
  Facts backend_facts() const override {
    return {{"visible devices", absl::StrCat(physical_.size())}};
  }
  Facts device_facts(int index) const override {
    return {{"physical index", absl::StrCat(physical_[index])}};
  }
  void on_set_device(int) noexcept override {}

  StreamId create_stream(int index, int priority) override {
    return exec_.create_stream(index, priority);
  }
  bool stream_exists(const Stream& s) const noexcept override {
    const int index = s.device().index();
    return index >= 0 && index < device_count() && s.id() >= 0 && s.id() < stream_count(index);
  }
  int stream_count(int index) const noexcept override {
    return exec_.stream_count(index);
  }
  int stream_priority(const Stream& s) const override {
    return exec_.stream_priority(s.device().index(), s.id());
  }
  bool query_stream(const Stream& s) override {
    return exec_.query_stream(s.device().index(), s.id());
  }
  void synchronize_stream(const Stream& s) override {
    exec_.synchronize_stream(s.device().index(), s.id());
  }
  void synchronize_device(int index) override { exec_.synchronize_device(index); }

  std::unique_ptr<BackendEvent> create_event(int index, bool timing) override {
    return std::make_unique<SimEvent>(index, timing);
  }
  void record_event(BackendEvent& event, const Stream& s) override {
    static_cast<SimEvent&>(event).latest = exec_.enqueue_record(s.device().index(), s.id());
  }
  void block_event(BackendEvent& event, const Stream& s) override {
    const auto& latest = static_cast<SimEvent&>(event).latest;
    if (latest) exec_.enqueue_wait(s.device().index(), s.id(), latest);
  }
  bool query_event(BackendEvent& event) override {
    const auto& latest = static_cast<SimEvent&>(event).latest;
    return !latest || exec_.query_marker(*latest);
  }
  void synchronize_event(BackendEvent& event) override {
    const auto& latest = static_cast<SimEvent&>(event).latest;
    if (latest) exec_.synchronize_marker(*latest);
  }
  double elapsed_ms(BackendEvent& start, BackendEvent& end) override {
    auto& a = static_cast<SimEvent&>(start);
    auto& b = static_cast<SimEvent&>(end);
    return exec_.elapsed_ms(*a.latest, *b.latest);
  }
  bool reports_orderings() const noexcept override { return false; }

  void submit(const Stream& s, HostFn fn) override {
    exec_.enqueue_work(s.device().index(), s.id(), detail::wrap_host_work(s, std::move(fn)));
  }
  void sleep(const Stream& s, double microseconds) override {
    exec_.enqueue_work(s.device().index(), s.id(), detail::wrap_host_work(s, [microseconds] {
      std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(microseconds));
    }));
  }
  void copy_async(void* dst, const void* src, size_t bytes, const Stream& s) override {
    // wrap_host_work: an observer (the trace) may time the work where it runs.
    exec_.enqueue_work(s.device().index(), s.id(), detail::wrap_host_work(s, [dst, src, bytes] {
                         std::memmove(dst, src, bytes);
                       }));
  }
  void fill_async(void* dst, unsigned char value, size_t bytes, const Stream& s) override {
    exec_.enqueue_work(s.device().index(), s.id(), detail::wrap_host_work(s, [dst, value, bytes] {
                         std::memset(dst, value, bytes);
                       }));
  }

  void* raw_alloc(int index, size_t bytes) override {
    const size_t size = round_up(bytes == 0 ? 1 : bytes, kAlignment);
    return with_room<void*>(index, size, nullptr, 0, [size](Memory& m) -> void* {
      void* p = std::aligned_alloc(kAlignment, size);
      if (p == nullptr) return nullptr;
      if (g_poison_new_memory.load(std::memory_order_relaxed)) std::memset(p, 0xFF, size);
      m.used += size;
      m.sizes[p] = size;
      return p;
    });
  }

  // As cudaFree, the memory must not be reused while queued work may still touch it; the
  // simulator defers the release until the streams that were busy have passed this point,
  // so that a free never blocks (it may run inside a task's teardown).
  void raw_free(int index, void* ptr) override {
    if (ptr == nullptr) return;
    std::vector<std::shared_ptr<Marker>> markers = busy_markers(index);
    std::lock_guard<std::mutex> lk(memory_mu_);
    Memory& m = memory_[index];
    m.deferred.push_back(Deferred{ptr, std::move(markers)});
    release_finished(m);
  }

  size_t total_memory(int) const override {
    const uint64_t limit = config().sim_memory_bytes;
    if (limit != 0) return limit;
    return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  }
  // Expandable segments on sim: an anonymous mapping with no access reserves the range;
  // mapping gives pages access (and counts them against the device's memory), unmapping
  // hands them back to the system and takes the access away again, once queued work has
  // passed (as raw_free), so a stale use faults instead of reading another tensor.
  size_t vm_granularity(int) const override { return kVmGranularity; }
  void* vm_reserve(int, size_t bytes) override {
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  bool vm_map(int index, void* ptr, size_t bytes) override {
    return with_room<bool>(index, bytes, ptr, bytes, [ptr, bytes](Memory& m) {
      if (mprotect(ptr, bytes, PROT_READ | PROT_WRITE) != 0) return false;
      if (g_poison_new_memory.load(std::memory_order_relaxed)) std::memset(ptr, 0xFF, bytes);
      m.used += bytes;
      return true;
    });
  }
  void vm_unmap(int index, void* ptr, size_t bytes) override {
    std::vector<std::shared_ptr<Marker>> markers = busy_markers(index);
    std::lock_guard<std::mutex> lk(memory_mu_);
    Memory& m = memory_[index];
    m.deferred.push_back(Deferred{ptr, std::move(markers), bytes});
    release_finished(m);
  }
  void* pinned_alloc(size_t bytes) override {
    return std::aligned_alloc(kAlignment, round_up(bytes == 0 ? 1 : bytes, kAlignment));
  }
  void pinned_free(void* ptr) noexcept override { std::free(ptr); }

 private:
  static constexpr size_t kVmGranularity = size_t{2} << 20;  // as cuda's mappings

  struct Deferred {
    void* ptr;
    std::vector<std::shared_ptr<Marker>> markers;
    size_t unmap_bytes = 0;  // 0: a raw_free; else a vm_unmap of this many bytes
  };

  // A marker on each stream of the device that still has work queued.
  std::vector<std::shared_ptr<Marker>> busy_markers(int index) {
    std::vector<std::shared_ptr<Marker>> markers;
    const int streams = exec_.stream_count(index);
    for (int id = 0; id < streams; ++id) {
      if (!exec_.query_stream(index, id)) markers.push_back(exec_.enqueue_record(index, id));
    }
    return markers;
  }
  struct Memory {
    size_t used = 0;
    std::unordered_map<void*, size_t> sizes;
    std::vector<Deferred> deferred;
  };

  // Calls take(m) under memory_mu_ once the device has room for `size` more bytes and no
  // deferred unmap of [lo, lo + span) is still waiting for queued work (span 0: none to
  // wait for); returns T{} (null, false) when there is no room even after waiting once for
  // the work behind every deferred release.
  template <typename T, typename Take>
  T with_room(int index, size_t size, const void* lo, size_t span, Take take) {
    const uint64_t limit = config().sim_memory_bytes;
    const char* const from = static_cast<const char*>(lo);
    bool waited_for_room = false;
    for (;;) {
      std::vector<std::shared_ptr<Marker>> waiting;
      {
        std::lock_guard<std::mutex> lk(memory_mu_);
        Memory& m = memory_[index];
        release_finished(m);
        for (const Deferred& d : m.deferred) {
          const char* p = static_cast<const char*>(d.ptr);
          if (span > 0 && d.unmap_bytes > 0 && p < from + span && from < p + d.unmap_bytes) {
            waiting.insert(waiting.end(), d.markers.begin(), d.markers.end());
          }
        }
        if (waiting.empty()) {
          if (limit == 0 || m.used + size <= limit) return take(m);
          if (waited_for_room || m.deferred.empty()) return T{};
          // Memory released but still possibly in use by queued work: wait for that
          // work, then look again once.
          for (const Deferred& d : m.deferred) {
            waiting.insert(waiting.end(), d.markers.begin(), d.markers.end());
          }
          waited_for_room = true;
        }
      }
      for (const auto& marker : waiting) exec_.synchronize_marker(*marker);
    }
  }

  void release_finished(Memory& m) {
    auto it = m.deferred.begin();
    while (it != m.deferred.end()) {
      bool done = true;
      for (const auto& marker : it->markers) done = done && exec_.query_marker(*marker);
      if (!done) {
        ++it;
        continue;
      }
      if (it->unmap_bytes > 0) {
        madvise(it->ptr, it->unmap_bytes, MADV_DONTNEED);
        mprotect(it->ptr, it->unmap_bytes, PROT_NONE);
        m.used -= it->unmap_bytes;
        it = m.deferred.erase(it);
        continue;
      }
      auto size_it = m.sizes.find(it->ptr);
      if (size_it != m.sizes.end()) {
        m.used -= size_it->second;
        m.sizes.erase(size_it);
      }
      std::free(it->ptr);
      it = m.deferred.erase(it);
    }
  }

  mutable SimExecutor exec_;  // its own lock makes const queries safe
  const std::vector<int> physical_;
  std::mutex memory_mu_;
  std::vector<Memory> memory_;
};

SG_REGISTER_BACKEND(DeviceType::kSim, SimBackend);

SimExecutor& executor() {
  return static_cast<SimBackend&>(backend(DeviceType::kSim)).executor();
}

}  // namespace

void set_sim_scheduler(const SimSchedulerOptions& options) { executor().set_options(options); }
SimSchedulerOptions sim_scheduler() { return executor().options(); }
bool sim_step() { return executor().step(); }
void sim_run_until_idle() { executor().synchronize_all(); }
uint64_t sim_steps_run() { return executor().steps_run(); }

namespace {
const Stream& sim_stream(const Stream& stream, const char* what) {
  SG_CHECK(stream.device().type() == DeviceType::kSim &&
               backend(DeviceType::kSim).stream_exists(stream),
           DeviceError, what, ": ", stream.str(), " is not a sim stream that exists");
  return stream;
}
}  // namespace

size_t sim_queue_depth(const Stream& stream) {
  const Stream& s = sim_stream(stream, "sim_queue_depth");
  return executor().queue_depth(s.device().index(), s.id());
}
size_t sim_peak_queue_depth(const Stream& stream) {
  const Stream& s = sim_stream(stream, "sim_peak_queue_depth");
  return executor().peak_queue_depth(s.device().index(), s.id());
}
size_t sim_queue_limit() { return executor().limits().queue_depth; }
int sim_worker_threads() { return executor().live_workers(); }
int sim_peak_worker_threads() { return executor().peak_workers(); }
int sim_worker_limit() { return executor().limits().max_workers; }
void sim_fail_next_thread_starts(int n) { executor().fail_next_thread_starts(n); }
void set_sim_poison_new_memory(bool on) { g_poison_new_memory.store(on); }

SimPolicy parse_sim_policy(const std::string& name) {
  if (name == "round-robin") return SimPolicy::kRoundRobin;
  if (name == "random") return SimPolicy::kRandom;
  if (name == "adversarial") return SimPolicy::kAdversarial;
  if (name == "pct") return SimPolicy::kPct;
  throw ValueError(absl::StrCat("unknown sim scheduling policy \"", name,
                                "\"; expected round-robin, random, adversarial or pct"));
}

SimSchedulerKind parse_sim_scheduler(const std::string& name) {
  if (name == "threaded") return SimSchedulerKind::kThreaded;
  if (name == "deterministic") return SimSchedulerKind::kDeterministic;
  throw ValueError(absl::StrCat("unknown sim scheduler \"", name,
                                "\"; expected threaded or deterministic"));
}

const char* sim_policy_name(SimPolicy policy) {
  switch (policy) {
    case SimPolicy::kRoundRobin:
      return "round-robin";
    case SimPolicy::kRandom:
      return "random";
    case SimPolicy::kAdversarial:
      return "adversarial";
    case SimPolicy::kPct:
      return "pct";
  }
  return "unknown";
}

namespace sim_internal {

SimSchedulerOptions options_from_config() {
  const RuntimeConfig& c = config();
  SimSchedulerOptions o;
  o.kind = parse_sim_scheduler(c.sim_scheduler);
  o.policy = parse_sim_policy(c.sim_policy);
  o.seed = c.sim_seed;
  o.jitter_us = c.sim_jitter_us;
  o.pct_depth = c.sim_pct_depth;
  o.pct_steps = c.sim_pct_steps;
  return o;
}

}  // namespace sim_internal

}  // namespace streamgrad

#include "runtime/backend/event.h"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/backend/config.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"

namespace streamgrad {

namespace {
std::atomic<uint64_t> g_records{0};
std::atomic<uint64_t> g_waits{0};
std::atomic<uint64_t> g_created{0};

// Free backend events by (device type, timing, device index), each list at most `cap`
// long: the shared pool and every thread's cache in front of it.
class FreeEvents {
 public:
  // A free event of that kind, or nullptr when there is none.
  std::unique_ptr<BackendEvent> take(DeviceType type, int index, bool timing) {
    std::vector<std::unique_ptr<BackendEvent>>* l = list(type, index, timing, /*grow=*/false);
    if (l == nullptr || l->empty()) return nullptr;
    std::unique_ptr<BackendEvent> e = std::move(l->back());
    l->pop_back();
    return e;
  }
  // Keeps `event` and returns true, unless its list is full (may throw bad_alloc).
  bool keep(DeviceType type, int index, bool timing, size_t cap,
            std::unique_ptr<BackendEvent>& event) {
    std::vector<std::unique_ptr<BackendEvent>>* l = list(type, index, timing, /*grow=*/true);
    if (l == nullptr || l->size() >= cap) return false;
    l->push_back(std::move(event));
    return true;
  }
  // Calls fn(type, index, timing, event) for every event, emptying the lists.
  template <typename Fn>
  void drain(Fn&& fn) {
    for (int slot = 0; slot < kNumDeviceTypes * 2; ++slot) {
      for (size_t index = 0; index < lists_[slot].size(); ++index) {
        for (auto& e : lists_[slot][index]) {
          fn(static_cast<DeviceType>(slot / 2), static_cast<int>(index), slot % 2 == 1,
             e.release());
        }
      }
      lists_[slot].clear();
    }
  }

 private:
  std::vector<std::unique_ptr<BackendEvent>>* list(DeviceType type, int index, bool timing,
                                                   bool grow) {
    std::vector<std::vector<std::unique_ptr<BackendEvent>>>& l =
        lists_[static_cast<int>(type) * 2 + (timing ? 1 : 0)];
    if (index < 0) return nullptr;
    if (static_cast<size_t>(index) >= l.size()) {
      if (!grow) return nullptr;
      l.resize(index + 1);
    }
    return &l[index];
  }
  std::vector<std::vector<std::unique_ptr<BackendEvent>>> lists_[kNumDeviceTypes * 2];
};

// The cap keeps a burst of live events (a wide backward) from pinning their memory, or
// their cuda events, for the rest of the process.
constexpr size_t kMaxPooledPerDevice = 256;

class EventPool {
 public:
  std::unique_ptr<BackendEvent> take(DeviceType type, int index, bool timing) {
    std::lock_guard<std::mutex> lk(mu_);
    return free_.take(type, index, timing);
  }
  void give(DeviceType type, int index, bool timing, BackendEvent* event) noexcept {
    // Declared before the lock: an event that is not kept is deleted after the unlock.
    std::unique_ptr<BackendEvent> owned(event);
    try {
      std::lock_guard<std::mutex> lk(mu_);
      free_.keep(type, index, timing, kMaxPooledPerDevice, owned);
    } catch (...) {  // out of memory growing the pool: delete the event instead
    }
  }

 private:
  std::mutex mu_;
  FreeEvents free_;
};

// Never destroyed: Events may die during static destruction, after a pool would have.
EventPool& event_pool() {
  static auto* pool = new EventPool();
  return *pool;
}

// A few free events per thread in front of the shared pool: the common pattern, an event
// recorded, waited on and dropped by one thread (the engine's per-edge events,
// wait_stream), then takes no lock, which made the pool cost more than the allocation it
// saves on sim. A thread's cache goes back to the shared pool when the thread ends.
constexpr size_t kMaxCachedPerThread = 16;

// False once this thread's cache is destroyed: an Event dying in a later thread_local
// destructor must not touch it. (A bool needs no destructor, so it outlives the cache.)
thread_local bool t_cache_alive = false;

struct ThreadCache {
  FreeEvents free;
  ThreadCache() { t_cache_alive = true; }
  ~ThreadCache() {
    t_cache_alive = false;
    free.drain([](DeviceType type, int index, bool timing, BackendEvent* e) {
      event_pool().give(type, index, timing, e);
    });
  }
};

// This thread's cache, or nullptr while it is being destroyed (or after).
ThreadCache* thread_cache() {
  thread_local ThreadCache cache;
  return t_cache_alive ? &cache : nullptr;
}

std::unique_ptr<BackendEvent> take_event(DeviceType type, int index, bool timing) {
  ThreadCache* cache = thread_cache();
  std::unique_ptr<BackendEvent> e =
      cache != nullptr ? cache->free.take(type, index, timing) : nullptr;
  return e != nullptr ? std::move(e) : event_pool().take(type, index, timing);
}

void give_event(DeviceType type, int index, bool timing, BackendEvent* event) noexcept {
  std::unique_ptr<BackendEvent> owned(event);
  try {
    ThreadCache* cache = thread_cache();
    if (cache != nullptr && cache->free.keep(type, index, timing, kMaxCachedPerThread, owned)) {
      return;
    }
  } catch (...) {  // out of memory: the shared pool decides
  }
  event_pool().give(type, index, timing, owned.release());
}

}  // namespace

namespace detail {
void PooledEventDeleter::operator()(BackendEvent* event) const noexcept {
  give_event(type, index, timing, event);
}
}  // namespace detail

uint64_t events_recorded() { return g_records.load(std::memory_order_relaxed); }
uint64_t stream_waits_issued() { return g_waits.load(std::memory_order_relaxed); }
uint64_t backend_events_created() { return g_created.load(std::memory_order_relaxed); }

void Event::record(const Stream& stream) {
  const Device d = resolve_device(stream.device(), "Event::record");
  if (device_.has_value() && *device_ != d) {
    throw DeviceError(absl::StrCat("Event::record: the event belongs to ", device_->str(),
                                   " (its first record) but the stream ", stream.str(),
                                   " is on ", d.str(),
                                   "; use one event per device"));
  }
  Backend& b = backend(d.type());
  const Stream s = Stream::unchecked(d, stream.id());
  SG_CHECK(b.stream_exists(s), DeviceError, "Event::record: stream ", s.str(),
           " does not exist");
  const bool first = impl_ == nullptr;
  if (first) {
    std::unique_ptr<BackendEvent> e = take_event(d.type(), d.index(), timing_);
    if (e == nullptr) {
      e = b.create_event(d.index(), timing_);
      g_created.fetch_add(1, std::memory_order_relaxed);
    }
    impl_ = std::unique_ptr<BackendEvent, detail::PooledEventDeleter>(
        e.release(), detail::PooledEventDeleter{d.type(), d.index(), timing_});
  }
  try {
    detail::OrderingReport report;
    b.record_event(*impl_, s);
  } catch (...) {
    // A pooled object may still hold another Event's record: this Event must stay
    // never recorded rather than inherit it, so the object is deleted, not pooled.
    if (first) delete impl_.release();
    throw;
  }
  g_records.fetch_add(1, std::memory_order_relaxed);
  if (detail::sync_faults_on()) detail::sync_fault_note_record(impl_.get(), s);
  if (detail::have_observers() && !b.reports_orderings()) {
    const void* key = impl_.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_record(key, s); });
  }
  device_ = d;
}

void Event::record(Device device) { record(current_stream(device)); }

void Event::block(const Stream& stream) const {
  // Never recorded, or recorded on the synchronous cpu stream: already complete.
  if (impl_ == nullptr || device_->is_cpu()) return;
  const Device d = resolve_device(stream.device(), "Event::block");
  if (d.is_cpu()) {
    synchronize();  // the cpu stream is the host: waiting is a host wait
    return;
  }
  SG_CHECK(d.type() == device_->type(), DeviceError, "Event::block: event recorded on ",
           device_->str(), " cannot order stream ", stream.str(), " of another device type; ",
           "synchronize the event on the host instead");
  const Stream s = Stream::unchecked(d, stream.id());
  // Fault injection (config.h): this wait may be the one a test leaves out.
  if (detail::sync_faults_on() &&
      detail::sync_fault_skip(SyncKind::kWait, s, impl_.get(), nullptr)) {
    return;
  }
  Backend& b = backend(d.type());
  {
    detail::OrderingReport report;
    b.block_event(*impl_, s);
  }
  g_waits.fetch_add(1, std::memory_order_relaxed);
  if (detail::have_observers() && !b.reports_orderings()) {
    const void* key = impl_.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_block(key, s); });
  }
}

bool Event::query() const {
  if (impl_ == nullptr) return true;
  const bool done = backend(device_->type()).query_event(*impl_);
  if (done && detail::have_observers()) {
    const void* key = impl_.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_complete(key); });
  }
  return done;
}

void Event::synchronize() const {
  if (impl_ == nullptr) return;
  backend(device_->type()).synchronize_event(*impl_);
  if (detail::have_observers()) {
    const void* key = impl_.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_complete(key); });
  }
}

double Event::elapsed_ms(const Event& end) const {
  SG_CHECK(timing_ && end.timing_, Error,
           "Event::elapsed_ms: both events must be created with timing (Event(true))");
  SG_CHECK(impl_ != nullptr && end.impl_ != nullptr, Error,
           "Event::elapsed_ms: both events must be recorded first");
  SG_CHECK(*device_ == *end.device_, DeviceError, "Event::elapsed_ms: events on ",
           device_->str(), " and ", end.device_->str(), " cannot be compared");
  SG_CHECK(query() && end.query(), Error,
           "Event::elapsed_ms: both events must have completed; call synchronize() first");
  return backend(device_->type()).elapsed_ms(*impl_, *end.impl_);
}

}  // namespace streamgrad

#include "runtime/memory/host_memory.h"

#include <map>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/config.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"
#include "runtime/memory/memory_history.h"
#include "runtime/memory/pending_uses.h"

namespace streamgrad {
namespace {

constexpr size_t kMinBlock = 512;

size_t round_block(size_t bytes) {
  size_t size = kMinBlock;
  while (size < bytes) size *= 2;
  return size;
}

std::string hex(const void* p) {
  return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p)));
}

class CachingHostAllocator {
 public:
  CachingHostAllocator()
      : backend_(is_available(DeviceType::kCuda) ? backend(DeviceType::kCuda)
                                                 : backend(DeviceType::kCpu)),
        caching_(!config().no_memory_caching) {}

  void* allocate(size_t bytes);
  void free(void* ptr);
  bool record_use(const void* ptr, const Stream& stream, bool must_be_pinned);
  bool is_pinned(const void* ptr);
  MemoryStats stats() {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.reset_peak();
  }
  void reset_accumulated() {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.reset_accumulated();
  }
  void empty_cache();

 private:
  struct Block {
    char* ptr;
    size_t size;
    size_t requested = 0;
    bool allocated = false;
    std::vector<Stream> uses;  // non-cpu streams that used it since it was handed out
  };
  using ToFree = std::vector<Block*>;

  Block* containing(const void* ptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void mark_allocated(Block* b, size_t requested) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The streams among b's uses that may still have work queued: an idle stream has
  // finished every use it was asked for, so freeing right after a synchronisation caches
  // the block at once.
  std::vector<Stream> busy_uses(const Block& b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A freed block whose uses are all complete: cached, or dropped without caching.
  void release(Block* b, ToFree& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void release_done(const std::vector<const void*>& done, ToFree& to_free)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void drop(Block* b, ToFree& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns dropped blocks to the backend, without the lock.
  void free_all(const ToFree& to_free);

  Backend& backend_;
  const bool caching_;
  std::mutex mu_;
  std::map<const char*, Block*> blocks_ ABSL_GUARDED_BY(mu_);  // every block held, by start
  std::multimap<size_t, Block*> cached_ ABSL_GUARDED_BY(mu_);  // free blocks by size
  PendingUses pending_ ABSL_GUARDED_BY(mu_);
  MemoryStats stats_ ABSL_GUARDED_BY(mu_);
};

void* CachingHostAllocator::allocate(size_t bytes) {
  const size_t size = round_block(bytes);
  ToFree to_free;
  Block* hit = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<const void*> done;
    pending_.poll(done);
    release_done(done, to_free);
    auto it = cached_.find(size);
    if (it != cached_.end()) {
      hit = it->second;
      cached_.erase(it);
      mark_allocated(hit, bytes);
      ++stats_.num_cache_hits;
    }
  }
  free_all(to_free);
  if (hit == nullptr) {
    void* p = backend_.pinned_alloc(size);
    if (p == nullptr) {
      empty_cache();
      p = backend_.pinned_alloc(size);
    }
    std::lock_guard<std::mutex> lk(mu_);
    if (p == nullptr) {
      ++stats_.num_ooms;
      throw OutOfMemoryError(
          absl::StrCat("pinned_alloc: cannot allocate ", format_bytes(static_cast<int64_t>(size)),
                       " of pinned host memory (", bytes, " bytes asked for); ",
                       format_bytes(stats_.allocated_bytes.current),
                       " of pinned memory is in use. Free pinned tensors that are no longer "
                       "needed"),
          bytes, static_cast<size_t>(stats_.allocated_bytes.current),
          static_cast<size_t>(stats_.reserved_bytes.current));
    }
    detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(p, size); });
    hit = new Block{static_cast<char*>(p), size};
    blocks_[hit->ptr] = hit;
    detail::note_pinned_event(MemoryAction::kSegmentAlloc, p, size);
    stats_.reserved_bytes.update(static_cast<int64_t>(size));
    stats_.segments.update(1);
    ++stats_.num_segment_allocs;
    mark_allocated(hit, bytes);
  }
  const Stream host = Stream::default_for(Device(DeviceType::kCpu));
  detail::notify_observers(
      [&](LaunchObserver& o) { o.on_buffer_allocated(hit->ptr, hit->size, host); });
  return hit->ptr;
}

void CachingHostAllocator::mark_allocated(Block* b, size_t requested) {
  detail::note_pinned_event(MemoryAction::kAlloc, b->ptr, b->size);
  b->allocated = true;
  b->requested = requested;
  stats_.allocated_bytes.update(static_cast<int64_t>(b->size));
  stats_.requested_bytes.update(static_cast<int64_t>(requested));
  stats_.active_bytes.update(static_cast<int64_t>(b->size));
  stats_.active_blocks.update(1);
  ++stats_.num_allocs;
}

void CachingHostAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  ToFree to_free;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = blocks_.find(static_cast<const char*>(ptr));
    SG_CHECK(it != blocks_.end() && it->second->allocated, ValueError, "pinned_free: ", hex(ptr),
             " is not a live block returned by pinned_alloc (already freed, or not its start)");
    Block* b = it->second;
    detail::note_pinned_event(MemoryAction::kFreeRequested, b->ptr, b->size);
    b->allocated = false;
    stats_.allocated_bytes.update(-static_cast<int64_t>(b->size));
    stats_.requested_bytes.update(-static_cast<int64_t>(b->requested));
    b->requested = 0;
    ++stats_.num_frees;
    const std::vector<Stream> busy = busy_uses(*b);
    b->uses.clear();
    if (busy.empty()) {
      release(b, to_free);
    } else {
      // See S8: a non-blocking copy may still read or write the block after this host
      // point; it is handed out again only once every stream that used it passed here.
      pending_.add(b, b->ptr, b->size, busy);
      ++stats_.num_deferred_frees;
    }
  }
  free_all(to_free);
}

std::vector<Stream> CachingHostAllocator::busy_uses(const Block& b) {
  std::vector<Stream> busy;
  for (const Stream& s : b.uses) {
    if (!backend(s.device().type()).query_stream(s)) {
      busy.push_back(s);
      continue;
    }
    // The host just learnt that s finished the block's uses: no event needed, and the
    // sanitizer orders the block's reuse (only its reuse: the timing was luck).
    detail::notify_observers(
        [&](LaunchObserver& o) { o.on_stream_done_with(s, b.ptr, b.size); });
  }
  return busy;
}

void CachingHostAllocator::release(Block* b, ToFree& to_free) {
  detail::note_pinned_event(MemoryAction::kFreeCompleted, b->ptr, b->size);
  stats_.active_bytes.update(-static_cast<int64_t>(b->size));
  stats_.active_blocks.update(-1);
  if (caching_) {
    cached_.emplace(b->size, b);
  } else {
    drop(b, to_free);
  }
}

void CachingHostAllocator::release_done(const std::vector<const void*>& done, ToFree& to_free) {
  for (const void* b : done) release(static_cast<Block*>(const_cast<void*>(b)), to_free);
}

void CachingHostAllocator::drop(Block* b, ToFree& to_free) {
  detail::note_pinned_event(MemoryAction::kSegmentFree, b->ptr, b->size);
  blocks_.erase(b->ptr);
  stats_.reserved_bytes.update(-static_cast<int64_t>(b->size));
  stats_.segments.update(-1);
  ++stats_.num_segment_frees;
  to_free.push_back(b);
}

void CachingHostAllocator::free_all(const ToFree& to_free) {
  for (Block* b : to_free) {
    backend_.pinned_free(b->ptr);
    detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(b->ptr, b->size); });
    delete b;
  }
}

void CachingHostAllocator::empty_cache() {
  // Wait unlocked: a wait may run sim work, and other threads may allocate meanwhile.
  PendingUses::Batch waiting;
  {
    std::lock_guard<std::mutex> lk(mu_);
    waiting = pending_.take();
  }
  PendingUses::wait(waiting);
  ToFree to_free;
  {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<const void*> done;
    pending_.finish(std::move(waiting), done);
    pending_.poll(done);
    release_done(done, to_free);
    for (auto& [size, b] : cached_) drop(b, to_free);
    cached_.clear();
  }
  free_all(to_free);
}

CachingHostAllocator::Block* CachingHostAllocator::containing(const void* ptr) {
  const char* p = static_cast<const char*>(ptr);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return nullptr;
  --it;
  Block* b = it->second;
  return b->allocated && p < b->ptr + b->size ? b : nullptr;
}

bool CachingHostAllocator::is_pinned(const void* ptr) {
  std::lock_guard<std::mutex> lk(mu_);
  return containing(ptr) != nullptr;
}

bool CachingHostAllocator::record_use(const void* ptr, const Stream& stream, bool must_be_pinned) {
  std::lock_guard<std::mutex> lk(mu_);
  Block* b = containing(ptr);
  if (b == nullptr) {
    SG_CHECK(!must_be_pinned, ValueError, "pinned_record_stream: ", hex(ptr),
             " is not inside a live pinned block (pinned_alloc / pin_memory); pageable memory "
             "needs no record: copies from it are blocking");
    return false;
  }
  if (stream.device().is_cpu()) return true;  // cpu work completes before launch returns
  for (const Stream& s : b->uses) {
    if (s == stream) return true;
  }
  b->uses.push_back(stream);
  return true;
}

CachingHostAllocator& host_allocator() {
  static auto* a = new CachingHostAllocator();  // leaked: pinned tensors may outlive statics
  return *a;
}

}  // namespace

void* pinned_alloc(size_t bytes) { return host_allocator().allocate(bytes); }
void pinned_free(void* ptr) { host_allocator().free(ptr); }
bool is_pinned(const void* ptr) { return host_allocator().is_pinned(ptr); }

void pinned_record_stream(const void* ptr, const Stream& stream) {
  const Device d = resolve_device(stream.device(), "pinned_record_stream");
  host_allocator().record_use(ptr, Stream::unchecked(d, stream.id()), true);
}

MemoryStats host_memory_stats() { return host_allocator().stats(); }
void reset_peak_host_memory_stats() { host_allocator().reset_peak(); }
void reset_accumulated_host_memory_stats() { host_allocator().reset_accumulated(); }
void host_empty_cache() { host_allocator().empty_cache(); }

namespace detail {
bool note_pinned_use(const void* ptr, const Stream& stream) {
  return host_allocator().record_use(ptr, stream, false);
}
}  // namespace detail

}  // namespace streamgrad

#include "runtime/memory/caching_allocator.h"
#include "runtime/memory/caching_allocator_block.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/backend/config.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"
#include "runtime/memory/memory_history.h"

namespace streamgrad {


StreamId DeviceAllocator::free_key(const Block* b) { return b->shared ? kAnyStream : b->stream; }

bool DeviceAllocator::BySize::operator()(const Block* a, const Block* b) const {
  if (free_key(a) != free_key(b)) return free_key(a) < free_key(b);
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

namespace {
// A backend that cannot tell its memory size reports 0: then nothing is refused up front.
size_t known_or_max(size_t total) {
  return total == 0 ? std::numeric_limits<size_t>::max() : total;
}
}  // namespace

DeviceAllocator::DeviceAllocator(Device device, Backend& backend, bool caching)
    : device_(device),
      backend_(backend),
      caching_(caching),
      cpu_(device.is_cpu()),
      conf_(device.is_cpu() ? AllocConf{} : alloc_conf()),
      total_memory_(known_or_max(backend.total_memory(device.index()))),
      limit_(std::numeric_limits<size_t>::max()),
      expandable_(!cpu_ && caching_ && conf_.expandable_segments &&
                  backend.vm_granularity(device.index()) > 0),
      granularity_(expandable_ ? backend.vm_granularity(device.index()) : 0) {
  if (!cpu_ && conf_.expandable_segments && !expandable_) {
    if (caching_) {
      SG_WARN("STREAMGRAD_ALLOC_CONF=expandable_segments:True: ", device.str(),
              " cannot map memory into a reserved range here; its allocator reserves whole "
              "segments instead");
    } else {
      SG_WARN("STREAMGRAD_ALLOC_CONF=expandable_segments:True has no effect with "
              "STREAMGRAD_NO_MEMORY_CACHING=1");
    }
  }
  if (!cpu_) return;
  cpu_cached_.resize(kCpuClasses);
  cpu_cache_limit_ = config().cpu_cache_bytes_set
                         ? static_cast<size_t>(config().cpu_cache_bytes)
                         : std::min(kCpuDefaultCacheBytes, total_memory_ / 4);
}

DeviceAllocator::~DeviceAllocator() {
  RawFrees to_free;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [addr, seg] : segments_) {
    for (Block* b = seg.head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
    // The expandable range stays mapped until exit.
    if (!seg.expandable) to_free.push_back({reinterpret_cast<void*>(addr), seg.size});
  }
  if (cpu_) take_all_cpu_blocks(to_free);
  // No observer calls here: allocators live until exit, when observers may be gone.
  for (const RawFree& f : to_free) backend_.raw_free(device_.index(), f.ptr);

}

void* DeviceAllocator::allocate(size_t bytes, const Stream& stream) {
  void* p = allocate_block(bytes, stream);
  if (p != nullptr && detail::have_observers()) {
    detail::notify_observers([&](LaunchObserver& o) { o.on_buffer_allocated(p, bytes, stream); });
  }
  return p;
}

void* DeviceAllocator::allocate_block(size_t bytes, const Stream& stream) {
  SG_CHECK(stream.device() == device_, DeviceError, "allocate: stream ", stream.str(),
           " is not a stream of ", device_.str(), ", whose allocator was asked");
  if (bytes == 0) return nullptr;
  if (cpu_) return allocate_cpu(bytes, stream);
  const size_t size = round_size(bytes);
  RawFrees to_free;
  void* hit = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    process_events(to_free);
    if (caching_) {
      if (Block* b = take_cached(size, stream.id())) {
        mark_allocated(b, bytes);
        ++stats_.num_cache_hits;
        hit = b->ptr;
      } else if (conf_.garbage_collection_threshold > 0) {
        collect_garbage(size, to_free);  // a new segment follows
      }
    }
  }
  raw_free_all(to_free);
  if (hit != nullptr) return hit;

  bool over_limit = false;
  Block* b = new_memory(size, stream, over_limit);
  if (b == nullptr) {
    // Give the cache back, then look again before failing: the wait may have freed a
    // block inside a segment that stays partly in use, which no new segment can replace.
    empty_cache();
    if (caching_) {
      std::lock_guard<std::mutex> lk(mu_);
      if (Block* cached = take_cached(size, stream.id())) {
        mark_allocated(cached, bytes);
        ++stats_.num_cache_hits;
        return cached->ptr;
      }
    }
    b = new_memory(size, stream, over_limit);
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (b == nullptr) {
    ++stats_.num_ooms;
    detail::note_memory_event(MemoryAction::kOom, device_, stream.id(), nullptr, bytes);
    throw out_of_memory(bytes, stream, over_limit);
  }
  mark_allocated(b, bytes);
  return b->ptr;
}

DeviceAllocator::Block* DeviceAllocator::new_memory(size_t size, const Stream& stream,
                                                     bool& over_limit) {
  // Small requests keep segments of their own (the reference's small pool): in the range,
  // they would split the free space that large tensors of the next step need whole.
  return expandable_ && size > kExpandableMinBytes ? grow(size, stream, over_limit)
                                                   : reserve_segment(size, stream, over_limit);
}

bool DeviceAllocator::over_limit_with(size_t bytes) const {
  const size_t held = static_cast<size_t>(stats_.reserved_bytes.current) + reserving_;
  return bytes > limit_ || held > limit_ - bytes;
}

DeviceAllocator::Block* DeviceAllocator::reserve_segment(size_t size, const Stream& stream,
                                                          bool& over_limit) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    over_limit = over_limit_with(size);
    if (over_limit) return nullptr;
    // More than the whole device can never be met: refused before the backend sees it,
    // so that multi-TiB requests never reach malloc (sanitizer runtimes abort on those
    // instead of returning null).
    if (size > total_memory_) return nullptr;
    reserving_ += size;
  }
  void* p = nullptr;
  try {
    p = backend_.raw_alloc(device_.index(), size);
  } catch (...) {
    std::lock_guard<std::mutex> lk(mu_);
    reserving_ -= size;
    throw;
  }
  std::lock_guard<std::mutex> lk(mu_);
  reserving_ -= size;
  if (p == nullptr) return nullptr;
  detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(p, size); });
  Block* b = new Block{static_cast<char*>(p), size, stream.id()};
  segments_[reinterpret_cast<uintptr_t>(p)] = Segment{size, b};
  stats_.reserved_bytes.update(static_cast<int64_t>(size));
  stats_.segments.update(1);
  ++stats_.num_segment_allocs;
  detail::note_memory_event(MemoryAction::kSegmentAlloc, device_, b->stream, p, size);
  return b;
}

DeviceAllocator::Block* DeviceAllocator::find_fit(size_t size, StreamId key_stream) {
  Block key{nullptr, size, key_stream};
  auto it = free_blocks_.lower_bound(&key);
  if (it == free_blocks_.end() || free_key(*it) != key_stream) return nullptr;
  Block* b = *it;
  // Blocks above max_split_size stay whole for big requests; every larger block is
  // oversize too, and wastes more.
  if (b->size > conf_.max_split_size &&
      (size <= conf_.max_split_size || b->size - size >= kOversizeWaste)) {
    return nullptr;
  }
  return b;
}

DeviceAllocator::Block* DeviceAllocator::take_cached(size_t size, StreamId stream) {
  Block* b = find_fit(size, stream);
  if (b == nullptr) b = find_fit(size, kAnyStream);
  if (b == nullptr) {
    // Other streams' free blocks become everyone's once those streams are done with them.
    if (share_free_blocks(stream) == 0) return nullptr;
    b = find_fit(size, stream);
    if (b == nullptr) b = find_fit(size, kAnyStream);
    if (b == nullptr) return nullptr;
  }
  free_blocks_.erase(b);
  if (b->size <= conf_.max_split_size) split_block(b, size);
  b->shared = false;
  b->stream = stream;
  return b;
}

void DeviceAllocator::split_block(Block* b, size_t size) {
  if (b->size - size < kRound) return;
  Block* rest = new Block{b->ptr + size, b->size - size, b->stream};
  rest->shared = b->shared;
  rest->freed_at = b->freed_at;  // its bytes' last uses are the whole block's
  rest->prev = b;
  rest->next = b->next;
  if (b->next != nullptr) b->next->prev = rest;
  b->next = rest;
  b->size = size;
  free_blocks_.insert(rest);
}

void DeviceAllocator::mark_allocated(Block* b, size_t requested) {
  b->allocated = true;
  b->requested = requested;
  live_[b->ptr] = b;
  stats_.allocated_bytes.update(static_cast<int64_t>(b->size));
  stats_.requested_bytes.update(static_cast<int64_t>(requested));
  stats_.active_bytes.update(static_cast<int64_t>(b->size));
  stats_.active_blocks.update(1);
  ++stats_.num_allocs;
  detail::note_memory_event(MemoryAction::kAlloc, device_, b->stream, b->ptr, b->size);
}

void DeviceAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  if (cpu_) return free_cpu(ptr);
  RawFrees to_free;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(ptr);
    SG_CHECK(it != live_.end(), ValueError, "free: 0x", absl::Hex(reinterpret_cast<uintptr_t>(ptr)),
             " is not a live allocation of the ", device_.str(), " allocator");
    Block* b = it->second;
    live_.erase(it);
    stats_.allocated_bytes.update(-static_cast<int64_t>(b->size));
    stats_.requested_bytes.update(-static_cast<int64_t>(b->requested));
    ++stats_.num_frees;
    detail::note_memory_event(MemoryAction::kFreeRequested, device_, b->stream, b->ptr, b->size);
    b->allocated = false;
    b->requested = 0;
    if (b->uses.empty()) {
      release_block(b, to_free);
    } else {
      // See S8: the block may be read on other streams after this host point; it comes
      // back only once those streams have passed it.
      std::vector<Stream> on;
      for (StreamId use : b->uses) on.push_back(Stream::unchecked(device_, use));
      pending_.add(b, b->ptr, b->size, on);
      b->pending = true;
      ++stats_.num_deferred_frees;
      b->uses.clear();
    }
  }
  raw_free_all(to_free);
}

void DeviceAllocator::release_block(Block* b, RawFrees& to_free) {
  b->pending = false;
  detail::note_memory_event(MemoryAction::kFreeCompleted, device_, b->stream, b->ptr, b->size);
  stats_.active_bytes.update(-static_cast<int64_t>(b->size));
  stats_.active_blocks.update(-1);
  if (!caching_) {
    drop_segment(b, to_free);
    return;
  }
  b->shared = false;  // its stream's alone until that stream is seen idle
  b->freed_at = ++frees_;
  cache_free_block(b);
}

void DeviceAllocator::drop_segment(Block* b, RawFrees& to_free) {
  SG_INTERNAL_CHECK(b->prev == nullptr && b->next == nullptr, "dropping a split segment");
  segments_.erase(reinterpret_cast<uintptr_t>(b->ptr));
  stats_.reserved_bytes.update(-static_cast<int64_t>(b->size));
  stats_.segments.update(-1);
  ++stats_.num_segment_frees;
  detail::note_memory_event(MemoryAction::kSegmentFree, device_, b->stream, b->ptr, b->size);
  to_free.push_back({b->ptr, b->size});
  delete b;
}

void DeviceAllocator::process_events(RawFrees& to_free) {
  std::vector<const void*> done;
  pending_.poll(done);
  release_done(done, to_free);
}

void DeviceAllocator::release_done(const std::vector<const void*>& done, RawFrees& to_free) {
  for (const void* b : done) release_block(static_cast<Block*>(const_cast<void*>(b)), to_free);
}

void DeviceAllocator::raw_free_all(const RawFrees& segments) {
  for (const RawFree& f : segments) {
    if (f.unmap) {
      backend_.vm_unmap(device_.index(), f.ptr, f.size);
    } else {
      backend_.raw_free(device_.index(), f.ptr);
    }
    detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(f.ptr, f.size); });
  }
}

void DeviceAllocator::empty_cache() {
  if (cpu_) {
    RawFrees to_free;
    {
      std::lock_guard<std::mutex> lk(mu_);
      trim_cpu_cache(0, to_free);
    }
    free_cpu_segments(to_free);
    return;
  }
  // Take the pending events out of the shared list so that no other thread re-records
  // them while this one waits on them unlocked (a wait may run sim work that frees).
  PendingUses::Batch waiting;
  {
    std::lock_guard<std::mutex> lk(mu_);
    waiting = pending_.take();
  }
  PendingUses::wait(waiting);
  RawFrees to_free;
  std::lock_guard<std::mutex> grow(grow_mu_);  // the unmaps included
  {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<const void*> done;
    pending_.finish(std::move(waiting), done);
    release_done(done, to_free);
    process_events(to_free);
    release_free_segments(to_free);
    if (expandable_) trim_expandable(to_free);
  }
  raw_free_all(to_free);
}

void DeviceAllocator::record_stream(void* ptr, const Stream& stream) {
  SG_CHECK(stream.device() == device_, DeviceError, "record_stream: stream ", stream.str(),
           " is on another device than the memory (", device_.str(),
           "); copy the data to that device instead");
  std::lock_guard<std::mutex> lk(mu_);
  if (cpu_) {
    cpu_block(ptr, "record_stream");  // cpu work is complete once launched: no use to wait for
    return;
  }
  auto it = live_.find(ptr);
  SG_CHECK(it != live_.end(), ValueError, "record_stream: 0x", absl::Hex(reinterpret_cast<uintptr_t>(ptr)),
           " is not a live allocation of the ", device_.str(), " allocator");
  Block* b = it->second;
  if (stream.id() == b->stream) return;
  for (StreamId use : b->uses) {
    if (use == stream.id()) return;
  }
  b->uses.push_back(stream.id());
}

Stream DeviceAllocator::block_stream(void* ptr) {
  std::lock_guard<std::mutex> lk(mu_);
  if (cpu_) return Stream::unchecked(device_, cpu_block(ptr, "block_stream").stream);
  auto it = live_.find(ptr);
  SG_CHECK(it != live_.end(), ValueError, "block_stream: 0x", absl::Hex(reinterpret_cast<uintptr_t>(ptr)),
           " is not a live allocation of the ", device_.str(), " allocator");
  return Stream::unchecked(device_, it->second->stream);
}

std::vector<SegmentInfo> DeviceAllocator::snapshot() {
  std::lock_guard<std::mutex> lk(mu_);
  if (cpu_) return cpu_snapshot();
  std::vector<SegmentInfo> out;
  for (const auto& [addr, seg] : segments_) {
    SegmentInfo info{device_, addr, seg.size, Stream::unchecked(device_, seg.head->stream), {}};
    for (const Block* b = seg.head; b != nullptr; b = b->next) {
      info.blocks.push_back(BlockInfo{reinterpret_cast<uintptr_t>(b->ptr), b->size, b->requested,
                                      b->allocated, b->pending,
                                      Stream::unchecked(device_, b->stream)});
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace streamgrad

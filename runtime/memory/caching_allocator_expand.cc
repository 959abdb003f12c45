// Expandable segments (caching_allocator.h): the device's one segment at the start of a
// reserved address range, grown by mapping pages at its end and trimmed by unmapping them.
#include "runtime/memory/caching_allocator.h"
#include "runtime/memory/caching_allocator_block.h"

#include <algorithm>

#include "runtime/backend/launch.h"
#include "runtime/memory/memory_history.h"

namespace streamgrad {
namespace {
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
}  // namespace

DeviceAllocator::Block* DeviceAllocator::expandable_tail() {
  if (range_ == nullptr) return nullptr;
  auto it = segments_.find(reinterpret_cast<uintptr_t>(range_));
  if (it == segments_.end()) return nullptr;
  Block* b = it->second.head;
  while (b->next != nullptr) b = b->next;
  return b;
}

DeviceAllocator::Block* DeviceAllocator::grow(size_t size, const Stream& stream,
                                              bool& over_limit) {
  std::lock_guard<std::mutex> grow(grow_mu_);
  for (;;) {
    char* at = nullptr;
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (range_ == nullptr) {
        // As large as the device (the range costs address space only).
        const size_t want = round_up(std::min(total_memory_, size_t{1} << 46), granularity_);
        range_ = static_cast<char*>(backend_.vm_reserve(device_.index(), want));
        if (range_ == nullptr) return nullptr;
        range_size_ = want;
      }
      // The stream may take the free block at the end (its own, or shared): what it
      // lacks is all that is mapped.
      Block* tail = expandable_tail();
      const bool usable = tail != nullptr && !tail->allocated && !tail->pending &&
                          (tail->shared || tail->stream == stream.id());
      if (usable && tail->size >= size) {
        free_blocks_.erase(tail);
        split_block(tail, size);
        tail->shared = false;
        tail->stream = stream.id();
        return tail;
      }
      bytes = round_up(size - (usable ? tail->size : 0), granularity_);
      over_limit = over_limit_with(bytes);
      if (over_limit || bytes > range_size_ - mapped_) return nullptr;
      at = range_ + mapped_;
      reserving_ += bytes;
    }
    bool mapped = false;
    try {
      mapped = backend_.vm_map(device_.index(), at, bytes);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      reserving_ -= bytes;
      throw;
    }
    std::lock_guard<std::mutex> lk(mu_);
    reserving_ -= bytes;
    if (!mapped) return nullptr;
    detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(at, bytes); });
    // The new pages join the segment as a free block of this stream (merged with a free
    // end block of the same kind); the next round takes it, or maps more when another
    // thread took the end block meanwhile.
    Block* tail = expandable_tail();
    Block* b = new Block{at, bytes, stream.id()};
    if (tail == nullptr) {
      segments_[reinterpret_cast<uintptr_t>(range_)] = Segment{bytes, b, /*expandable=*/true};
      stats_.segments.update(1);
    } else {
      tail->next = b;
      b->prev = tail;
      segments_.at(reinterpret_cast<uintptr_t>(range_)).size += bytes;
    }
    mapped_ += bytes;
    stats_.reserved_bytes.update(static_cast<int64_t>(bytes));
    ++stats_.num_segment_allocs;
    detail::note_memory_event(MemoryAction::kSegmentAlloc, device_, stream.id(), at, bytes);
    cache_free_block(b);
  }
}

void DeviceAllocator::trim_expandable(RawFrees& to_free) {
  const auto is_free = [](const Block* b) { return !b->allocated && !b->pending; };
  Block* tail = expandable_tail();
  if (tail == nullptr || !is_free(tail)) return;
  // The free blocks at the end, whatever their streams; whole pages only, since the first
  // one's first bytes may share a page with a block in use.
  Block* first = tail;
  while (first->prev != nullptr && is_free(first->prev)) first = first->prev;
  const size_t start = round_up(static_cast<size_t>(first->ptr - range_), granularity_);
  if (start >= mapped_) return;
  char* const at = range_ + start;
  const size_t cut = mapped_ - start;
  const StreamId owner = tail->stream;
  const uintptr_t key = reinterpret_cast<uintptr_t>(range_);
  for (Block* b = tail; b != nullptr && b->ptr + b->size > at;) {
    Block* prev = b->prev;
    free_blocks_.erase(b);
    if (b->ptr < at) {
      b->size = static_cast<size_t>(at - b->ptr);
      free_blocks_.insert(b);
      break;
    }
    if (prev != nullptr) {
      prev->next = nullptr;
    } else {
      segments_.erase(key);
      stats_.segments.update(-1);
    }
    delete b;
    b = prev;
  }
  auto seg = segments_.find(key);
  if (seg != segments_.end()) seg->second.size -= cut;
  mapped_ -= cut;
  stats_.reserved_bytes.update(-static_cast<int64_t>(cut));
  ++stats_.num_segment_frees;
  detail::note_memory_event(MemoryAction::kSegmentFree, device_, owner, at, cut);
  to_free.push_back({at, cut, /*unmap=*/true});
}

}  // namespace streamgrad

// The caching allocator's reuse of free blocks across streams (caching_allocator.h): a
// free block is its stream's alone until the allocator learns that stream is done with
// it, and everyone's after that; free neighbours of the same kind merge; whole free
// segments go back to the device. Allocation and freeing are in caching_allocator.cc.
//
// Why markers recorded at misses and not an event per free: the question only matters
// on a miss, when the alternative is a new segment, so the hot path (a free) records
// nothing. An idle stream answers it for all its blocks at once; for a busy one, the
// event of one miss answers it at the next for every block the stream had freed by then,
// however much work the stream was given since (a stream that is never idle, as in a
// training loop whose host runs ahead, would otherwise keep its free blocks to itself
// until memory ran out).
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/backend/observer.h"
#include "runtime/memory/caching_allocator.h"
#include "runtime/memory/caching_allocator_block.h"

namespace streamgrad {

template <typename Covered, typename Tell>
int DeviceAllocator::share_blocks_of(StreamId stream, Covered covered, Tell tell) {
  Block lo{nullptr, 0, stream}, hi{nullptr, 0, stream + 1};
  std::vector<Block*> mine;
  for (auto it = free_blocks_.lower_bound(&lo); it != free_blocks_.lower_bound(&hi); ++it) {
    if (covered(*it)) mine.push_back(*it);
  }
  for (Block* b : mine) free_blocks_.erase(b);
  for (Block* b : mine) {
    tell(b);
    b->shared = true;
    cache_free_block(b);
  }
  return static_cast<int>(mine.size());
}

int DeviceAllocator::share_free_blocks(StreamId except) {
  // Streams holding free blocks of their own: keys >= 0 sort after the shared ones.
  std::vector<StreamId> owners;
  Block first{nullptr, 0, 0};
  for (auto it = free_blocks_.lower_bound(&first); it != free_blocks_.end();) {
    const StreamId s = (*it)->stream;
    if (s != except) owners.push_back(s);
    Block next{nullptr, 0, s + 1};
    it = free_blocks_.lower_bound(&next);
  }
  int shared = 0;
  for (StreamId s : owners) {
    const Stream stream = Stream::unchecked(device_, s);
    auto marker = markers_.find(s);
    if (backend_.query_stream(stream)) {
      // For the stream sanitizer this orders the next owner's accesses after the last
      // one's, for these bytes only: the stream being idle now is luck of timing.
      shared += share_blocks_of(
          s, [](const Block*) { return true; },
          [&](const Block* b) {
            detail::notify_observers(
                [&](LaunchObserver& o) { o.on_stream_done_with(stream, b->ptr, b->size); });
          });
      if (marker != markers_.end()) {
        pending_.recycle(device_, std::move(marker->second.event));
        markers_.erase(marker);
      }
      continue;
    }
    if (marker != markers_.end()) {
      if (!backend_.query_event(*marker->second.event)) continue;  // still before it
      const uint64_t upto = marker->second.upto;
      const BackendEvent& event = *marker->second.event;
      shared += share_blocks_of(
          s, [upto](const Block* b) { return b->freed_at <= upto; },
          [&](const Block* b) { PendingUses::notify_done(event, b->ptr, b->size); });
      pending_.recycle(device_, std::move(marker->second.event));
      markers_.erase(marker);
    }
    // Blocks freed since (or every block, at a first miss): the next miss may share them.
    Block lo{nullptr, 0, s};
    auto it = free_blocks_.lower_bound(&lo);
    if (it != free_blocks_.end() && (*it)->stream == s) {
      markers_.emplace(s, ShareMarker{pending_.record(stream), frees_});
    }
  }
  return shared;
}

void DeviceAllocator::cache_free_block(Block* b) {
  // A neighbour merges only if it is free in the same way: two streams' own blocks stay
  // apart, and a shared block does not take on a stream's restriction.
  // (Takes the block as an argument: `b` becomes its left neighbour after the first merge.)
  const auto same_kind = [](const Block* a, const Block* n) {
    return n != nullptr && !n->allocated && !n->pending && n->shared == a->shared &&
           (a->shared || n->stream == a->stream);
  };
  // Merges `right` into its left neighbour `left`; neither is in free_blocks_ afterwards.
  const auto absorb = [this](Block* left, Block* right) {
    free_blocks_.erase(left);
    free_blocks_.erase(right);
    left->size += right->size;
    // A share marker covers the merged block only if it covers both halves.
    left->freed_at = std::max(left->freed_at, right->freed_at);
    left->next = right->next;
    if (right->next != nullptr) right->next->prev = left;
    delete right;
  };
  if (same_kind(b, b->prev)) {
    Block* prev = b->prev;
    absorb(prev, b);
    b = prev;
  }
  if (same_kind(b, b->next)) absorb(b, b->next);
  free_blocks_.insert(b);
}

std::vector<std::pair<uint64_t, uintptr_t>> DeviceAllocator::whole_free_segments() {
  // A segment all of whose blocks are free can go back, whichever streams they belong to:
  // the raw free waits for all queued work of the device (Backend::raw_free), so no use
  // of any of them can still be running.
  std::vector<std::pair<uint64_t, uintptr_t>> out;
  for (const auto& [addr, seg] : segments_) {
    if (seg.expandable) continue;  // trimmed, never dropped
    bool all_free = true;
    uint64_t last = 0;
    for (const Block* b = seg.head; b != nullptr && all_free; b = b->next) {
      all_free = !b->allocated && !b->pending;
      last = std::max(last, b->freed_at);
    }
    if (all_free) out.emplace_back(last, addr);
  }
  return out;
}

void DeviceAllocator::drop_whole_segment(uintptr_t addr, RawFrees& to_free) {
  Block* head = segments_.at(addr).head;
  size_t size = 0;
  for (Block* b = head; b != nullptr;) {
    Block* next = b->next;
    free_blocks_.erase(b);
    size += b->size;
    if (b != head) delete b;
    b = next;
  }
  head->size = size;
  head->next = nullptr;
  drop_segment(head, to_free);
}

void DeviceAllocator::release_free_segments(RawFrees& to_free) {
  for (const auto& [last, addr] : whole_free_segments()) drop_whole_segment(addr, to_free);
}

void DeviceAllocator::collect_garbage(size_t size, RawFrees& to_free) {
  const double allowed = static_cast<double>(std::min(limit_, total_memory_)) *
                         conf_.garbage_collection_threshold;
  const auto over = [&] {
    return static_cast<double>(stats_.reserved_bytes.current) + static_cast<double>(size) >
           allowed;
  };
  if (!over()) return;
  std::vector<std::pair<uint64_t, uintptr_t>> whole = whole_free_segments();
  std::sort(whole.begin(), whole.end());  // least recently freed first
  for (const auto& [last, addr] : whole) {
    if (!over()) break;
    drop_whole_segment(addr, to_free);
  }
}

}  // namespace streamgrad

// The stream-ordered caching allocator: one per device, shared code for sim and cuda.
// cpu uses the same class in direct mode, for the statistics: its kernels finish before
// their launch returns and nothing is ever pending on another stream, so each
// allocation is its own segment, kept in a flat hash map without the Block bookkeeping
// (per-op allocations of tiny tensors dominate the forward pass of small-op graphs).
//
// Rules (ARCHITECTURE.md §4, S8):
//   - Sizes are rounded up to multiples of 512 bytes (64 on cpu); each cache miss
//     reserves one segment of exactly the rounded size from the backend. Requests of 0
//     bytes return nullptr.
//   - A block belongs to the stream it was allocated on. Freed on that stream, it is
//     reusable on that stream at once (stream order makes this safe) and by no other
//     stream. Cached blocks are split (best fit) and coalesced with free neighbours.
//   - record_stream(ptr, s) notes a use on another stream s of the same device. When such a
//     block is freed, an event is recorded on each of those streams and the block returns
//     to the cache only once all have completed.
//   - On a cache miss that the device cannot satisfy, or that would take reserved bytes
//     past the per-process memory fraction (set_memory_fraction), cached free segments
//     are returned to the device and the allocation is retried once; then
//     OutOfMemoryError, leaving every live block and statistic as it was (except
//     num_ooms and the released cache).
//   - STREAMGRAD_NO_MEMORY_CACHING=1: segments go back to the device as soon as they are
//     free (after their other-stream uses complete), never reused from a cache.
//
// Statistics are exact (memory_stats.h): allocated = sum of the rounded sizes of live
// blocks, requested = sum of the sizes asked for, reserved = sum of segment sizes, active =
// allocated plus freed blocks still pending other streams' uses.
//
// Thread-safety: every method is thread-safe (one std::mutex per device allocator).
// Failure: OutOfMemoryError (requested, allocated and reserved bytes in the message and
// the object); ValueError for a pointer the allocator does not own or a fraction outside
// [0, 1]; DeviceError for a record_stream on another device's stream.
#ifndef STREAMGRAD_RUNTIME_MEMORY_CACHING_ALLOCATOR_H_
#define STREAMGRAD_RUNTIME_MEMORY_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/stream.h"
#include "runtime/base/device.h"
#include "runtime/base/error.h"
#include "runtime/memory/memory_stats.h"
#include "runtime/memory/pending_uses.h"

namespace streamgrad {

struct BlockInfo {
  uintptr_t address;
  size_t size;
  size_t requested;  // 0 when free
  bool allocated;
  bool pending;  // freed, waiting for uses on other streams to complete
  Stream stream;
};

struct SegmentInfo {
  Device device;
  uintptr_t address;
  size_t size;
  Stream stream;
  std::vector<BlockInfo> blocks;  // in address order
};

class DeviceAllocator {
 public:
  static constexpr size_t kRound = 512;
  // cpu (direct mode): a finer grain keeps tiny tensors' chunks small and close together.
  static constexpr size_t kDirectRound = 64;

  DeviceAllocator(Device device, Backend& backend, bool caching);
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  Device device() const { return device_; }
  bool caching() const { return caching_; }

  void* allocate(size_t bytes, const Stream& stream);
  void free(void* ptr);
  void record_stream(void* ptr, const Stream& stream);
  // The stream a live block was allocated on.
  Stream block_stream(void* ptr);

  MemoryStats stats();
  void reset_peak_stats();
  // Zeroes accumulated totals and counts (MemoryStats::reset_accumulated).
  void reset_accumulated_stats();
  // Caps reserved bytes at fraction * total_memory (1: the device's total). ValueError
  // for a fraction outside [0, 1]; segments already reserved stay.
  void set_memory_fraction(double fraction);
  double memory_fraction();
  // Waits for pending cross-stream uses, then returns every free segment to the device.
  void empty_cache();
  std::vector<SegmentInfo> snapshot();

 private:
  struct RawFree {
    void* ptr;
    size_t size;
  };
  using RawFrees = std::vector<RawFree>;
  static size_t round_size(size_t bytes) { return (bytes + kRound - 1) / kRound * kRound; }
  // allocate() without telling the observers.
  void* allocate_block(size_t bytes, const Stream& stream);
  // The cpu's direct mode (caching_allocator_direct.cc).
  struct DirectBlock {
    size_t size;
    size_t requested;
    StreamId stream;
  };
  void* allocate_direct(size_t bytes, const Stream& stream);
  void free_direct(void* ptr);
  DirectBlock direct_block(void* ptr, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<SegmentInfo> direct_snapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Block;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };

  Block* take_cached(size_t size, StreamId stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void mark_allocated(Block* b, size_t requested) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A block whose uses are all complete becomes free: cached (coalesced) or released.
  void release_block(Block* b, RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void process_events(RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void release_done(const std::vector<const void*>& done, RawFrees& to_free)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new segment of `size` bytes within the fraction limit, registered and not yet
  // allocated; nullptr when the device or the limit refuses (`over_limit` says which).
  Block* reserve_segment(size_t size, const Stream& stream, bool& over_limit);
  OutOfMemoryError out_of_memory(size_t bytes, const Stream& stream, bool over_limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void release_free_segments(RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void drop_segment(Block* b, RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns segments to the device and tells the observers the memory is gone (its
  // access history can go with it: raw_free waits for every queued use).
  void raw_free_all(const RawFrees& segments);

  const Device device_;
  Backend& backend_;
  const bool caching_;
  const bool direct_;
  std::mutex mu_;
  absl::flat_hash_map<void*, DirectBlock> direct_live_ ABSL_GUARDED_BY(mu_);
  std::set<Block*, BySize> free_blocks_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<void*, Block*> live_ ABSL_GUARDED_BY(mu_);
  struct Segment {
    size_t size;
    Block* head;  // the block at the segment's start; stable until the segment is dropped
  };
  std::map<uintptr_t, Segment> segments_ ABSL_GUARDED_BY(mu_);
  PendingUses pending_ ABSL_GUARDED_BY(mu_);
  MemoryStats stats_ ABSL_GUARDED_BY(mu_);
  double fraction_ ABSL_GUARDED_BY(mu_) = 1.0;
  const size_t total_memory_;               // the device's, read once at creation
  size_t limit_ ABSL_GUARDED_BY(mu_);      // reserved bytes allowed by fraction_
  size_t reserving_ ABSL_GUARDED_BY(mu_) = 0;  // raw allocations in flight
};

// The allocator of `device` (index -1: the current device), created on first use.
DeviceAllocator& allocator_for(Device device);

MemoryStats memory_stats(Device device);
void reset_peak_stats(Device device);
void reset_accumulated_stats(Device device);
void empty_cache(Device device);
std::vector<SegmentInfo> memory_snapshot(Device device);
// Caps the memory the device's allocator may reserve at fraction * its total memory (sim:
// STREAMGRAD_SIM_MEMORY_BYTES, or host memory when unset), as the reference framework's
// set_per_process_memory_fraction does. ValueError for a fraction outside [0, 1].
void set_per_process_memory_fraction(double fraction, Device device);
double get_per_process_memory_fraction(Device device);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_CACHING_ALLOCATOR_H_

// The stream-ordered caching allocator: one per device. sim and cuda share the
// segment-splitting code (caching_allocator.cc); cpu has its own mode
// (caching_allocator_cpu.cc): its kernels finish before their launch returns and nothing is
// ever pending on another stream, so each block is its own segment, kept in a flat hash map
// without the Block bookkeeping (per-op allocations of tiny tensors dominate the forward
// pass of small-op graphs), and freed blocks wait in size-class free lists for reuse.
//
// Rules (ARCHITECTURE.md §4, S8):
//   - Sizes are rounded up to multiples of 512 bytes (64 on cpu); on sim and cuda each
//     cache miss reserves one segment of exactly the rounded size from the backend.
//     Requests of 0 bytes return nullptr.
//   - A block belongs to the stream it was allocated on. Freed on that stream, it is
//     reusable on that stream at once (stream order makes this safe); other streams get
//     it once an event shows that its stream has run everything enqueued before the free,
//     every use of the block included. Asked on a miss, before a new segment is reserved:
//     the free blocks of a stream seen idle become everyone's, and so do those a stream
//     freed before its share marker, an event recorded on it at an earlier miss (one
//     outstanding per stream), once that event has completed, even while the stream
//     keeps working. Then each stream still holding free blocks of its own gets a marker,
//     so a busy stream strands its free memory only until the next miss after it passes
//     the marker. Cached blocks are split (best fit) and coalesced with free neighbours
//     of the same stream, or shared with shared ones.
//   - record_stream(ptr, s) notes a use on another stream s of the same device. When such a
//     block is freed, an event is recorded on each of those streams and the block returns
//     to the cache only once all have completed. (cpu has one stream whose work is done
//     when launched: record_stream checks the pointer and has nothing to wait for.)
//   - On a cache miss that the device cannot satisfy, or that would take reserved bytes
//     past the per-process memory fraction (set_memory_fraction), the allocator waits for
//     the other-stream uses it is waiting on, returns whole free segments to the device,
//     searches its free blocks again (a wait may have freed one inside a segment still
//     partly in use) and then retries the device once; then OutOfMemoryError, leaving
//     every live block and statistic as it was (except num_ooms and the released cache),
//     its message listing per stream what is allocated and cached.
//   - STREAMGRAD_ALLOC_CONF (alloc_conf.h) on sim and cuda: max_split_size_mb keeps
//     cached blocks above it whole; garbage_collection_threshold frees least recently
//     freed cached segments before a new segment would take reserved memory past it.
//   - expandable_segments:True, where the backend maps memory into reserved address
//     ranges (Backend::vm_granularity; sim: 2 MiB pages; cuda: the driver's granularity,
//     2 MiB on current GPUs; elsewhere a warning and whole segments): the device's
//     memory for requests over kExpandableMinBytes is one segment at the start of a
//     range the size of the device, grown at its end on a miss instead of reserving a
//     new segment; smaller requests reserve segments of their own on a miss (the
//     reference's small pool), so that they do not split free space of the range that
//     the next step's large tensors need whole.
//     A miss maps only what the request lacks beyond a free last block the stream may use
//     (its own, or shared), rounded up to pages, so a growing tensor size reuses the same
//     bytes instead of stranding each smaller segment (the reference's reason for the
//     setting). Blocks split, merge and move between streams as in any segment;
//     max_split_size does not apply. empty_cache() (and the out-of-memory retry) unmaps
//     the whole pages of free blocks at the segment's end; the range stays reserved.
//     garbage_collection_threshold does not trim it.
//   - STREAMGRAD_NO_MEMORY_CACHING=1: segments go back to the device as soon as they are
//     free (after their other-stream uses complete), never reused from a cache; on cpu too.
//
// cpu: every block is 64-byte aligned and its segment is the block's size class: the
// 64-byte-rounded size itself up to 1 KiB (16 classes), above that the next of the four
// steps that split each power of two (1.25, 1.5, 1.75, 2 x 2^k), so a segment wastes at
// most a fifth of itself and a step's temporaries, whose sizes recur step after step,
// find their class again. A freed block goes to its class's free list (no splitting, no
// coalescing: the next allocation of the class takes the most recently freed block) as
// long as the cached bytes stay within the cap (set_cpu_cache_limit,
// STREAMGRAD_CPU_CACHE_BYTES; default kCpuDefaultCacheBytes, at most a quarter of the
// machine's memory); past it the least recently freed blocks go back to the system first,
// and a block larger than the cap is never kept. Why: without reuse each step's MB-sized
// temporaries came from mmap, or from a heap glibc had just trimmed, and were
// page-faulted and zeroed afresh by the kernel every step. Under AddressSanitizer a
// cached block stays poisoned, so a use after free is still reported, and a live block's
// bytes past its 64-byte-rounded size are poisoned as malloc's redzone would be. A reused
// cpu block is announced to the observers as fresh memory (on_memory_reset), as a block
// from malloc was: cpu memory that another device's stream wrote (a copy from sim or
// cuda) must be ordered before its free by the caller, as before (the stream sanitizer
// would otherwise flag the reuse: tests/distributed/ddp_test's trace case does).
//
// Statistics are exact (memory_stats.h): allocated = sum of the rounded sizes of live
// blocks, requested = sum of the sizes asked for, reserved = sum of segment sizes (cached
// blocks included, on cpu as on sim and cuda), active = allocated plus freed blocks still
// pending other streams' uses (on cpu: allocated).
//
// Thread-safety: every method is thread-safe (one std::mutex per device allocator).
// Failure: OutOfMemoryError (requested, allocated and reserved bytes in the message and
// the object); ValueError for a pointer the allocator does not own or a fraction outside
// [0, 1]; DeviceError for a record_stream on another device's stream, or a cache limit
// set on a device other than cpu.
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
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/stream.h"
#include "runtime/base/device.h"
#include "runtime/base/error.h"
#include "runtime/memory/alloc_conf.h"
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
  // expandable_segments: requests up to this size reserve segments of their own.
  static constexpr size_t kExpandableMinBytes = size_t{1} << 20;
  // cpu: a finer grain keeps tiny tensors' chunks small and close together; it is also
  // every cpu block's alignment (a cache line, the widest vector a kernel loads).
  static constexpr size_t kCpuRound = 64;
  // cpu: the cached bytes allowed when STREAMGRAD_CPU_CACHE_BYTES is unset (at most a
  // quarter of the machine's memory): a few steps' worth of temporaries of a mid-sized
  // model.
  static constexpr size_t kCpuDefaultCacheBytes = size_t{1} << 30;

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
  // cpu only (DeviceError elsewhere): the most bytes of freed blocks kept for reuse; a
  // lower limit returns the least recently freed blocks to the system at once.
  void set_cache_limit(size_t bytes);
  size_t cache_limit();
  std::vector<SegmentInfo> snapshot();

 private:
  struct RawFree {
    void* ptr;
    size_t size;
    bool unmap = false;  // pages of the expandable segment, not a whole segment
  };
  using RawFrees = std::vector<RawFree>;
  static size_t round_size(size_t bytes) { return (bytes + kRound - 1) / kRound * kRound; }
  // allocate() without telling the observers.
  void* allocate_block(size_t bytes, const Stream& stream);
  // The cpu's mode (caching_allocator_cpu.cc).
  struct CpuBlock {
    size_t size;
    size_t requested;
    StreamId stream;
    int size_class;
  };
  struct CpuCached {
    void* ptr;
    uint64_t freed;  // order of the free, for evicting the least recently freed
  };
  static constexpr int kCpuClasses = 16 + 4 * 53;  // 64 B .. 2^63 B
  void* allocate_cpu(size_t bytes, const Stream& stream);
  void free_cpu(void* ptr);
  CpuBlock cpu_block(void* ptr, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns cached blocks to the system, least recently freed first, until at most
  // `keep` bytes stay cached.
  void trim_cpu_cache(size_t keep, RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The destructor's: every block, live or cached, ready to go back to the system.
  void take_all_cpu_blocks(RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives segments back to the system, then tells the observers.
  void free_cpu_segments(const RawFrees& segments);
  std::vector<SegmentInfo> cpu_snapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Block;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };

  // A free block's key in free_blocks_: its stream, or kAnyStream once shared.
  static constexpr StreamId kAnyStream = -1;
  static StreamId free_key(const Block* b);
  // The smallest free block of at least `size` bytes under `key_stream`, or nullptr.
  Block* find_fit(size_t size, StreamId key_stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Best fit among the stream's own free blocks and the shared ones (after sharing other
  // streams' blocks when neither fits), split, owned by `stream`; nullptr on a miss.
  Block* take_cached(size_t size, StreamId stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // caching_allocator_reuse.cc. Shares the free blocks that other streams than `except`
  // are done with (the stream idle, or past its share marker: queries, no wait), records
  // markers on the streams that still hold free blocks; returns how many it shared.
  int share_free_blocks(StreamId except) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the free blocks of `stream` that pass `covered` everyone's; the observers learn
  // it through `tell` (per block's bytes).
  template <typename Covered, typename Tell>
  int share_blocks_of(StreamId stream, Covered covered, Tell tell)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts a free block in free_blocks_, merged with free neighbours of the same kind.
  void cache_free_block(Block* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void mark_allocated(Block* b, size_t requested) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A block whose uses are all complete becomes free: cached (coalesced) or released.
  void release_block(Block* b, RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void process_events(RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void release_done(const std::vector<const void*>& done, RawFrees& to_free)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new segment of `size` bytes within the fraction limit, registered and not yet
  // allocated; nullptr when the device or the limit refuses (`over_limit` says which).
  Block* reserve_segment(size_t size, const Stream& stream, bool& over_limit);
  // Whether `bytes` more would pass the fraction limit, counting what is reserved and the
  // backend calls in flight (reserving_), so that concurrent misses cannot pass it
  // together. A false answer claims nothing: the caller adds to reserving_.
  bool over_limit_with(size_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // reserve_segment, or grow() where segments are expandable.
  Block* new_memory(size_t size, const Stream& stream, bool& over_limit);
  // Splits what `b` has beyond `size` into a free block of b's stream (b is not in
  // free_blocks_).
  void split_block(Block* b, size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // caching_allocator_expand.cc. A block of at least `size` bytes for `stream` at the
  // expandable segment's end, mapping what is missing; nullptr as reserve_segment.
  Block* grow(size_t size, const Stream& stream, bool& over_limit);
  Block* expandable_tail() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unmaps the whole pages of the free blocks at the expandable segment's end.
  void trim_expandable(RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  OutOfMemoryError out_of_memory(size_t bytes, const Stream& stream, bool over_limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // " (sim:0/s1: 1.00 MiB allocated, 0 B cached; any stream: ...)" over the segments.
  std::string by_stream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void release_free_segments(RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Segments all of whose blocks are free, with the latest free among their blocks.
  std::vector<std::pair<uint64_t, uintptr_t>> whole_free_segments()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void drop_whole_segment(uintptr_t addr, RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // garbage_collection_threshold (alloc_conf.h): frees whole free segments, least
  // recently freed first, while a new segment of `size` would pass the threshold.
  void collect_garbage(size_t size, RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void drop_segment(Block* b, RawFrees& to_free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns segments to the device and tells the observers the memory is gone (its
  // access history can go with it: raw_free waits for every queued use).
  void raw_free_all(const RawFrees& segments);

  const Device device_;
  Backend& backend_;
  const bool caching_;
  const bool cpu_;
  const AllocConf conf_;  // STREAMGRAD_ALLOC_CONF's, on sim and cuda; defaults on cpu
  uint64_t frees_ ABSL_GUARDED_BY(mu_) = 0;
  std::mutex mu_;
  absl::flat_hash_map<void*, CpuBlock> cpu_live_ ABSL_GUARDED_BY(mu_);
  // Per size class, oldest free first.
  std::vector<std::vector<CpuCached>> cpu_cached_ ABSL_GUARDED_BY(mu_);
  size_t cpu_cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t cpu_cache_limit_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t cpu_frees_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<Block*, BySize> free_blocks_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<void*, Block*> live_ ABSL_GUARDED_BY(mu_);
  struct Segment {
    size_t size;
    Block* head;  // the block at the segment's start; stable until the segment is dropped
    bool expandable = false;  // the expandable range's: trimmed by pages, never raw-freed
  };
  std::map<uintptr_t, Segment> segments_ ABSL_GUARDED_BY(mu_);
  PendingUses pending_ ABSL_GUARDED_BY(mu_);
  // A stream's share marker: an event recorded on it, and frees_'s count then (its free
  // blocks with freed_at up to `upto` are covered).
  struct ShareMarker {
    std::unique_ptr<BackendEvent> event;
    uint64_t upto;
  };
  std::unordered_map<StreamId, ShareMarker> markers_ ABSL_GUARDED_BY(mu_);
  MemoryStats stats_ ABSL_GUARDED_BY(mu_);
  double fraction_ ABSL_GUARDED_BY(mu_) = 1.0;
  const size_t total_memory_;               // the device's, read once at creation
  size_t limit_ ABSL_GUARDED_BY(mu_);      // reserved bytes allowed by fraction_
  size_t reserving_ ABSL_GUARDED_BY(mu_) = 0;  // raw allocations in flight
  // expandable_segments: the reserved range (base null until the first miss), the bytes
  // mapped at its start, and the backend's page.
  const bool expandable_;
  const size_t granularity_;
  char* range_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t range_size_ ABSL_GUARDED_BY(mu_) = 0;
  size_t mapped_ ABSL_GUARDED_BY(mu_) = 0;
  // Held by grow() and by the trim, with its unmap calls, so that no map of a range is
  // decided while an unmap of it is being handed to the backend. Taken before mu_.
  std::mutex grow_mu_;
};

// The allocator of `device` (index -1: the current device), created on first use.
DeviceAllocator& allocator_for(Device device);

MemoryStats memory_stats(Device device);
void reset_peak_stats(Device device);
void reset_accumulated_stats(Device device);
void empty_cache(Device device);
std::vector<SegmentInfo> memory_snapshot(Device device);
// The most bytes of freed cpu blocks the cpu allocator keeps for reuse (see above;
// STREAMGRAD_CPU_CACHE_BYTES sets it at start-up). Lowering it releases cached blocks at
// once; 0 keeps none.
void set_cpu_cache_limit(size_t bytes);
size_t get_cpu_cache_limit();
// Caps the memory the device's allocator may reserve at fraction * its total memory (sim:
// STREAMGRAD_SIM_MEMORY_BYTES, or host memory when unset), as the reference framework's
// set_per_process_memory_fraction does. ValueError for a fraction outside [0, 1].
void set_per_process_memory_fraction(double fraction, Device device);
double get_per_process_memory_fraction(Device device);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_CACHING_ALLOCATOR_H_

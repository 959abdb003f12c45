// Memory statistics shared by the device caching allocators (caching_allocator.h) and the
// pinned host allocator (host_memory.h), in the style users know from the reference
// framework's memory_stats(): every byte or block count is a MemoryStat with its current
// value, its peak since the last reset_peak, and the accumulated totals of increases
// ("allocated") and decreases ("freed") since the last reset_accumulated.
//
// Thread-safety: plain values; the allocators update them under their own locks and hand
// out copies.
// Failure: none.
#ifndef STREAMGRAD_RUNTIME_MEMORY_MEMORY_STATS_H_
#define STREAMGRAD_RUNTIME_MEMORY_MEMORY_STATS_H_

#include <cstdint>
#include <string>

namespace streamgrad {

struct MemoryStat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // sum of all increases (accumulated)
  int64_t freed = 0;      // sum of all decreases (accumulated)

  void update(int64_t delta);
};

struct MemoryStats {
  MemoryStat allocated_bytes;  // live blocks, rounded sizes
  MemoryStat requested_bytes;  // live blocks, sizes asked for
  MemoryStat reserved_bytes;   // segments held from the device
  // Live blocks plus freed blocks still pending other streams' uses: memory that cannot
  // be handed out yet.
  MemoryStat active_bytes;
  MemoryStat active_blocks;  // the same, counted in blocks
  MemoryStat segments;
  // Accumulated counts (reset_accumulated zeroes them).
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
  int64_t num_cache_hits = 0;      // allocations served from cached blocks
  int64_t num_segment_allocs = 0;  // raw device allocations
  int64_t num_segment_frees = 0;
  int64_t num_deferred_frees = 0;  // frees that waited for other streams' uses
  int64_t num_ooms = 0;

  // Every peak becomes the current value.
  void reset_peak();
  // Zeroes the accumulated totals and counts; current values and peaks stay.
  void reset_accumulated();
};

// "1.50 MiB (1572864 bytes)": how byte counts appear in messages and reports.
std::string format_bytes(int64_t bytes);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_MEMORY_STATS_H_

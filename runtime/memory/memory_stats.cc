#include "runtime/memory/memory_stats.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace streamgrad {

void MemoryStat::update(int64_t delta) {
  current += delta;
  if (current > peak) peak = current;
  if (delta > 0) {
    allocated += delta;
  } else {
    freed -= delta;
  }
}

void MemoryStats::reset_peak() {
  for (MemoryStat* s : {&allocated_bytes, &requested_bytes, &reserved_bytes, &active_bytes,
                        &active_blocks, &segments}) {
    s->peak = s->current;
  }
}

void MemoryStats::reset_accumulated() {
  for (MemoryStat* s : {&allocated_bytes, &requested_bytes, &reserved_bytes, &active_bytes,
                        &active_blocks, &segments}) {
    s->allocated = 0;
    s->freed = 0;
  }
  for (int64_t* n : {&num_allocs, &num_frees, &num_cache_hits, &num_segment_allocs,
                     &num_segment_frees, &num_deferred_frees, &num_ooms}) {
    *n = 0;
  }
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrCat(bytes, " bytes");
  return absl::StrFormat("%.2f %s (%d bytes)", v, units[u], bytes);
}

}  // namespace streamgrad

// The cpu allocator's mode (runtime/memory/caching_allocator.h): one segment per block, and
// statistics, limits, snapshots and misuse errors that read as the caching allocator's
// do. Its cache of freed blocks is allocator_cpu_cache_test's.
#include <catch2/catch.hpp>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kCpu("cpu");

TEST_CASE("cpu statistics are exact; freed blocks stay reserved until empty_cache",
          "[allocator][cpu]") {
  DeviceAllocator& a = allocator_for(kCpu);
  CHECK(a.caching());
  empty_cache(kCpu);
  const MemoryStats before = memory_stats(kCpu);
  const Stream s = Stream::default_for(kCpu);
  void* p = a.allocate(100, s);
  void* q = a.allocate(513, s);
  REQUIRE(p != nullptr);
  REQUIRE(q != nullptr);
  MemoryStats mid = memory_stats(kCpu);
  CHECK(mid.allocated_bytes.current - before.allocated_bytes.current == 128 + 576);
  CHECK(mid.requested_bytes.current - before.requested_bytes.current == 100 + 513);
  CHECK(mid.reserved_bytes.current - before.reserved_bytes.current == 128 + 576);
  CHECK(mid.segments.current - before.segments.current == 2);
  CHECK(mid.num_allocs - before.num_allocs == 2);
  CHECK(a.block_stream(q) == s);

  bool found = false;
  for (const SegmentInfo& seg : memory_snapshot(kCpu)) {
    if (seg.address != reinterpret_cast<uintptr_t>(q)) continue;
    found = true;
    CHECK(seg.size == 576);  // rounded to 64 bytes on cpu
    REQUIRE(seg.blocks.size() == 1);
    CHECK(seg.blocks[0].requested == 513);
    CHECK(seg.blocks[0].allocated);
  }
  CHECK(found);

  a.free(p);
  a.free(q);
  const MemoryStats after = memory_stats(kCpu);
  CHECK(after.allocated_bytes.current == before.allocated_bytes.current);
  CHECK(after.requested_bytes.current == before.requested_bytes.current);
  // Freed blocks are cached: still reserved, as on sim and cuda, until empty_cache.
  CHECK(after.reserved_bytes.current - before.reserved_bytes.current == 128 + 576);
  CHECK(after.active_bytes.current == before.active_bytes.current);
  CHECK(after.num_frees - before.num_frees == 2);
  CHECK(after.allocated_bytes.peak >= before.allocated_bytes.current + 704);
  empty_cache(kCpu);
  const MemoryStats emptied = memory_stats(kCpu);
  CHECK(emptied.reserved_bytes.current == before.reserved_bytes.current);
  CHECK(emptied.segments.current == before.segments.current);
  CHECK(emptied.num_segment_frees - before.num_segment_frees == 2);
}

TEST_CASE("cpu misuse is a clear error and leaves the allocator usable",
          "[allocator][cpu][errors]") {
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  int on_stack = 0;
  CHECK_THROWS_WITH(a.free(&on_stack), Catch::Contains("is not a live allocation of the cpu"));
  CHECK_THROWS_WITH(a.record_stream(&on_stack, s), Catch::Contains("is not a live allocation"));
  CHECK_THROWS_AS(a.block_stream(&on_stack), ValueError);
  void* p = a.allocate(64, s);
  a.free(p);
  CHECK_THROWS_AS(a.free(p), ValueError);  // a double free is caught, not passed to libc
  CHECK(a.allocate(0, s) == nullptr);
}

TEST_CASE("the cpu memory fraction refuses what would pass it, changing no statistic",
          "[allocator][cpu][fraction]") {
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  empty_cache(kCpu);  // an allocation refused by the limit releases the cache first
  set_per_process_memory_fraction(0.0, kCpu);
  const MemoryStats before = memory_stats(kCpu);
  CHECK_THROWS_AS(a.allocate(4096, s), OutOfMemoryError);
  const MemoryStats after = memory_stats(kCpu);
  set_per_process_memory_fraction(1.0, kCpu);
  CHECK(after.num_ooms == before.num_ooms + 1);
  CHECK(after.allocated_bytes.current == before.allocated_bytes.current);
  CHECK(after.reserved_bytes.current == before.reserved_bytes.current);
  void* p = a.allocate(4096, s);
  CHECK(p != nullptr);
  a.free(p);
}

TEST_CASE("a cpu request larger than the machine is an OutOfMemoryError",
          "[allocator][cpu][errors]") {
  const Stream s = Stream::default_for(kCpu);
  CHECK_THROWS_WITH(allocator_for(kCpu).allocate(size_t{1} << 62, s),
                    Catch::Contains("out of memory"));
}

}  // namespace
}  // namespace streamgrad

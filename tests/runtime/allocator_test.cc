// The stream-ordered caching allocator: reuse rules, cross-stream uses (S8), exact
// statistics, empty_cache, snapshots. Runs on sim:1 so that other tests' use of sim:0 in
// the same process does not disturb the byte counts.
#include "runtime/memory/caching_allocator.h"

#include <catch2/catch.hpp>
#include <memory>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kDev("sim:1");

SimSchedulerOptions deterministic() {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  return o;
}

// Starts every case from an empty cache with the same baseline.
struct Fresh {
  Fresh() {
    synchronize(kDev);
    empty_cache(kDev);
    reset_peak_stats(kDev);
    base = memory_stats(kDev);
  }
  MemoryStats base;
};

TEST_CASE("a block freed on its stream is reused on that stream at once", "[allocator]") {
  Fresh f;
  const Stream s = Stream::create(kDev);
  void* first;
  {
    Storage a = Storage::allocate(1000, s);
    first = a.data();
  }
  Storage b = Storage::allocate(1000, s);
  CHECK(b.data() == first);
  CHECK(memory_stats(kDev).num_cache_hits == f.base.num_cache_hits + 1);
}

TEST_CASE("a cached block of an idle stream is handed to another stream", "[allocator]") {
  Fresh f;
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  void* first;
  {
    Storage a = Storage::allocate(4096, s);
    first = a.data();
  }
  Storage b = Storage::allocate(4096, t);  // s has nothing queued: its block is everyone's
  CHECK(b.data() == first);
  CHECK(memory_stats(kDev).num_cache_hits == f.base.num_cache_hits + 1);
  CHECK(memory_stats(kDev).reserved_bytes.peak == 4096);
}

TEST_CASE("a block used on another stream is reused only after that use completes",
          "[allocator][S8]") {
  SimSchedulerScope scope(deterministic());  // nothing runs until the host waits
  Fresh f;
  const Stream alloc_stream = Stream::create(kDev);
  const Stream reader = Stream::create(kDev);
  void* first;
  auto seen = std::make_shared<int>(0);
  {
    Storage a = Storage::allocate(2048, alloc_stream);
    first = a.data();
    *static_cast<int*>(first) = 42;
    const MemRange r[] = {{first, 2048}};
    int* p = static_cast<int*>(first);
    launch(reader, {"slow_reader", r, {}}, [p, seen] { *seen = *p; });
    a.record_stream(reader);
  }  // freed on the host while reader's work is still queued
  Storage early = Storage::allocate(2048, alloc_stream);
  CHECK(early.data() != first);  // reuse now would race with the reader
  *static_cast<int*>(early.data()) = -1;  // the new owner writes at once
  CHECK(memory_stats(kDev).num_deferred_frees == f.base.num_deferred_frees + 1);
  const auto snap = memory_snapshot(kDev);
  bool pending_seen = false;
  for (const auto& seg : snap) {
    for (const auto& b : seg.blocks) {
      if (b.address == reinterpret_cast<uintptr_t>(first)) pending_seen = b.pending;
    }
  }
  CHECK(pending_seen);
  reader.synchronize();  // the reader's use completes (early stays live: only `first` is free)
  CHECK(*seen == 42);
  Storage later = Storage::allocate(2048, alloc_stream);
  CHECK(later.data() == first);
}

TEST_CASE("statistics match hand-computed byte counts", "[allocator][stats]") {
  Fresh f;
  const Stream s = Stream::create(kDev);
  const MemoryStats& b = f.base;
  Storage x = Storage::allocate(1000, s);  // rounds to 1024
  Storage y = Storage::allocate(512, s);   // exactly 512
  Storage z = Storage::allocate(1, s);     // rounds to 512
  MemoryStats m = memory_stats(kDev);
  CHECK(m.allocated_bytes.current - b.allocated_bytes.current == 1024 + 512 + 512);
  CHECK(m.requested_bytes.current - b.requested_bytes.current == 1000 + 512 + 1);
  CHECK(m.reserved_bytes.current - b.reserved_bytes.current == 2048);
  CHECK(m.num_allocs - b.num_allocs == 3);
  CHECK(m.num_segment_allocs - b.num_segment_allocs == 3);
  CHECK(m.active_blocks.current - b.active_blocks.current == 3);

  x = Storage();  // free 1024: cached, still reserved
  m = memory_stats(kDev);
  CHECK(m.allocated_bytes.current - b.allocated_bytes.current == 1024);
  CHECK(m.allocated_bytes.peak - b.allocated_bytes.current == 2048);
  CHECK(m.reserved_bytes.current - b.reserved_bytes.current == 2048);
  CHECK(m.num_frees - b.num_frees == 1);

  // 300 bytes fit the cached 1024 block: split into 512 used + 512 cached.
  Storage w = Storage::allocate(300, s);
  m = memory_stats(kDev);
  CHECK(m.num_cache_hits - b.num_cache_hits == 1);
  CHECK(m.allocated_bytes.current - b.allocated_bytes.current == 1024 + 512);
  CHECK(m.reserved_bytes.current - b.reserved_bytes.current == 2048);

  reset_peak_stats(kDev);
  CHECK(memory_stats(kDev).allocated_bytes.peak == memory_stats(kDev).allocated_bytes.current);

  w = Storage();  // coalesces back into one free 1024 block
  const auto snap = memory_snapshot(kDev);
  size_t free_1024 = 0;
  for (const auto& seg : snap) {
    if (seg.size == 1024) {
      CHECK(seg.blocks.size() == 1);
      CHECK_FALSE(seg.blocks[0].allocated);
      ++free_1024;
    }
  }
  CHECK(free_1024 == 1);
  y = Storage();
  z = Storage();
  m = memory_stats(kDev);
  CHECK(m.allocated_bytes.current == b.allocated_bytes.current);
  CHECK(m.requested_bytes.current == b.requested_bytes.current);
}

TEST_CASE("empty_cache returns reserved bytes to zero when nothing is allocated",
          "[allocator]") {
  Fresh f;
  REQUIRE(f.base.allocated_bytes.current == 0);
  const Stream s = Stream::create(kDev);
  {
    Storage a = Storage::allocate(1 << 20, s);
    Storage b = Storage::allocate(3000, Stream::create(kDev));
    CHECK(memory_stats(kDev).reserved_bytes.current > 0);
  }
  CHECK(memory_stats(kDev).reserved_bytes.current > 0);  // cached
  empty_cache(kDev);
  const MemoryStats m = memory_stats(kDev);
  CHECK(m.reserved_bytes.current == 0);
  CHECK(m.segments.current == 0);
  CHECK(memory_snapshot(kDev).empty());
}

TEST_CASE("empty_cache waits for pending cross-stream uses before releasing",
          "[allocator][S8]") {
  SimSchedulerScope scope(deterministic());
  Fresh f;
  const Stream s = Stream::create(kDev), reader = Stream::create(kDev);
  auto seen = std::make_shared<int>(0);
  {
    Storage a = Storage::allocate(sizeof(int), s);
    int* p = static_cast<int*>(a.data());
    *p = 99;
    const MemRange r[] = {{p, sizeof(int)}};
    launch(reader, {"reader", r, {}}, [p, seen] { *seen = *p; });
    a.record_stream(reader);
  }
  empty_cache(kDev);  // must let the reader finish before the memory goes
  CHECK(*seen == 99);
  CHECK(memory_stats(kDev).reserved_bytes.current == 0);
}

TEST_CASE("allocator misuse is a clear error", "[allocator][errors]") {
  DeviceAllocator& a = allocator_for(kDev);
  int on_stack = 0;
  CHECK_THROWS_WITH(a.free(&on_stack), Catch::Contains("is not a live allocation"));
  Storage st = Storage::allocate(64, kDev);
  CHECK_THROWS_AS(st.record_stream(Stream::default_for(Device("sim:0"))), DeviceError);
  CHECK_THROWS_AS(a.allocate(64, Stream::default_for(Device("sim:0"))), DeviceError);
  CHECK(a.allocate(0, Stream::default_for(kDev)) == nullptr);
}

TEST_CASE("format_bytes", "[allocator]") {
  CHECK(format_bytes(512) == "512 bytes");
  CHECK(format_bytes(1536) == "1.50 KiB (1536 bytes)");
}

}  // namespace
}  // namespace streamgrad

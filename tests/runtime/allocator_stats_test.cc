// Statistics of the device caching allocator as users know them from the reference
// framework's memory_stats(): accumulated allocated/freed totals per statistic, active bytes
// (live blocks plus freed blocks still pending other streams' uses) and
// reset_accumulated_stats, which zeroes totals and counts but leaves current values and
// peaks alone. Runs on sim:1 (see allocator_test.cc).
#include <catch2/catch.hpp>
#include <memory>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kDev("sim:1");

struct Fresh {
  Fresh() {
    synchronize(kDev);
    empty_cache(kDev);
    reset_peak_stats(kDev);
    reset_accumulated_stats(kDev);
    base = memory_stats(kDev);
  }
  MemoryStats base;
};

TEST_CASE("byte statistics accumulate allocated and freed totals", "[allocator][stats]") {
  Fresh f;
  REQUIRE(f.base.allocated_bytes.allocated == 0);
  REQUIRE(f.base.allocated_bytes.freed == 0);
  const Stream s = Stream::create(kDev);
  Storage x = Storage::allocate(1000, s);  // 1024
  Storage y = Storage::allocate(512, s);   // 512
  x = Storage();
  Storage z = Storage::allocate(1024, s);  // cache hit: x's block again
  MemoryStats m = memory_stats(kDev);
  CHECK(m.allocated_bytes.allocated == 1024 + 512 + 1024);
  CHECK(m.allocated_bytes.freed == 1024);
  CHECK(m.allocated_bytes.current - f.base.allocated_bytes.current == 1536);
  CHECK(m.requested_bytes.allocated == 1000 + 512 + 1024);
  CHECK(m.requested_bytes.freed == 1000);
  CHECK(m.reserved_bytes.allocated == 1536);
  CHECK(m.reserved_bytes.freed == 0);
  CHECK(m.active_bytes.allocated == 1024 + 512 + 1024);
  CHECK(m.active_bytes.freed == 1024);
  y = Storage();
  z = Storage();
  empty_cache(kDev);
  m = memory_stats(kDev);
  CHECK(m.reserved_bytes.freed == 1536);
  CHECK(m.segments.allocated == 2);
  CHECK(m.segments.freed == 2);
}

TEST_CASE("active bytes count freed blocks until other streams' uses complete",
          "[allocator][stats][S8]") {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  SimSchedulerScope scope(o);  // the reader runs only when the host waits
  Fresh f;
  const Stream s = Stream::create(kDev), reader = Stream::create(kDev);
  auto seen = std::make_shared<int>(0);
  {
    Storage a = Storage::allocate(2048, s);
    int* p = static_cast<int*>(a.data());
    *p = 5;
    const MemRange r[] = {{p, sizeof(int)}};
    launch(reader, {"reader", r, {}}, [p, seen] { *seen = *p; });
    a.record_stream(reader);
  }
  MemoryStats m = memory_stats(kDev);
  CHECK(m.allocated_bytes.current == f.base.allocated_bytes.current);
  CHECK(m.active_bytes.current - f.base.active_bytes.current == 2048);
  CHECK(m.active_blocks.current - f.base.active_blocks.current == 1);
  reader.synchronize();
  empty_cache(kDev);  // notices the reader's event completed
  m = memory_stats(kDev);
  CHECK(*seen == 5);
  CHECK(m.active_bytes.current == f.base.active_bytes.current);
  CHECK(m.active_blocks.current == f.base.active_blocks.current);
  CHECK(m.active_bytes.peak - f.base.active_bytes.current == 2048);
}

TEST_CASE("reset_accumulated_stats zeroes totals and counts, not current values or peaks",
          "[allocator][stats]") {
  Fresh f;
  const Stream s = Stream::create(kDev);
  Storage keep = Storage::allocate(4096, s);
  { Storage gone = Storage::allocate(1024, s); }
  Storage hit = Storage::allocate(1024, s);
  MemoryStats before = memory_stats(kDev);
  REQUIRE(before.num_allocs == 3);
  REQUIRE(before.num_cache_hits == 1);
  reset_accumulated_stats(kDev);
  const MemoryStats m = memory_stats(kDev);
  for (const MemoryStat* st : {&m.allocated_bytes, &m.requested_bytes, &m.reserved_bytes,
                               &m.active_bytes, &m.active_blocks, &m.segments}) {
    CHECK(st->allocated == 0);
    CHECK(st->freed == 0);
  }
  CHECK(m.num_allocs == 0);
  CHECK(m.num_frees == 0);
  CHECK(m.num_cache_hits == 0);
  CHECK(m.num_segment_allocs == 0);
  CHECK(m.num_segment_frees == 0);
  CHECK(m.num_deferred_frees == 0);
  CHECK(m.num_ooms == 0);
  CHECK(m.allocated_bytes.current == before.allocated_bytes.current);
  CHECK(m.allocated_bytes.peak == before.allocated_bytes.peak);
  CHECK(m.reserved_bytes.current == before.reserved_bytes.current);
  CHECK(m.active_bytes.current == before.active_bytes.current);
  hit = Storage();  // counting starts again from zero
  CHECK(memory_stats(kDev).num_frees == 1);
  CHECK(memory_stats(kDev).allocated_bytes.freed == 1024);
}

}  // namespace
}  // namespace streamgrad

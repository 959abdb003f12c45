// STREAMGRAD_NO_MEMORY_CACHING=1 (set by the BUILD target): freed memory goes straight
// back to the device (cpu's too), after any other-stream uses complete.
#include <catch2/catch.hpp>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kDev("sim:0");

TEST_CASE("without caching, frees release segments", "[allocator][no_caching]") {
  REQUIRE(config().no_memory_caching);
  CHECK_FALSE(allocator_for(kDev).caching());
  const Stream s = Stream::create(kDev);
  { Storage a = Storage::allocate(5000, s); }
  MemoryStats m = memory_stats(kDev);
  CHECK(m.reserved_bytes.current == 0);
  CHECK(m.num_cache_hits == 0);
  { Storage b = Storage::allocate(5000, s); }
  m = memory_stats(kDev);
  CHECK(m.num_segment_allocs == 2);
  CHECK(m.num_segment_frees == 2);
  CHECK(m.num_cache_hits == 0);
}

TEST_CASE("without caching, cpu frees release their memory at once",
          "[allocator][no_caching][cpu]") {
  const Device cpu("cpu");
  DeviceAllocator& a = allocator_for(cpu);
  CHECK_FALSE(a.caching());
  const Stream s = Stream::default_for(cpu);
  const MemoryStats m0 = memory_stats(cpu);
  for (int i = 0; i < 2; ++i) a.free(a.allocate(size_t{1} << 20, s));
  const MemoryStats m1 = memory_stats(cpu);
  CHECK(m1.reserved_bytes.current == m0.reserved_bytes.current);
  CHECK(m1.num_cache_hits == m0.num_cache_hits);
  CHECK(m1.num_segment_allocs - m0.num_segment_allocs == 2);
  CHECK(m1.num_segment_frees - m0.num_segment_frees == 2);
  CHECK(memory_snapshot(cpu).size() == static_cast<size_t>(m1.segments.current));
}

TEST_CASE("without caching, a block used on another stream is released after that use",
          "[allocator][no_caching][S8]") {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  SimSchedulerScope scope(o);
  const Stream s = Stream::create(kDev), reader = Stream::create(kDev);
  auto seen = std::make_shared<int>(0);
  {
    Storage a = Storage::allocate(sizeof(int), s);
    int* p = static_cast<int*>(a.data());
    *p = 5;
    const MemRange r[] = {{p, sizeof(int)}};
    launch(reader, {"reader", r, {}}, [p, seen] { *seen = *p; });
    a.record_stream(reader);
  }
  CHECK(memory_stats(kDev).reserved_bytes.current > 0);  // still held for the reader
  reader.synchronize();
  empty_cache(kDev);
  CHECK(*seen == 5);
  CHECK(memory_stats(kDev).reserved_bytes.current == 0);
}

}  // namespace
}  // namespace streamgrad

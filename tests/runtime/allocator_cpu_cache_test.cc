// The cpu allocator's cache of freed blocks (runtime/memory/caching_allocator.h): reuse
// within a size class, the cap on cached bytes and which blocks it drops, empty_cache,
// set_cpu_cache_limit, 64-byte alignment, exact statistics under concurrent use, the
// memory fraction, and AddressSanitizer's view of cached blocks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define SG_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SG_TEST_ASAN 1
#endif
#endif
#ifdef SG_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace streamgrad {
namespace {

const Device kCpu("cpu");
constexpr size_t kMiB = size_t{1} << 20;
constexpr int64_t kStatMiB = int64_t{1} << 20;  // for comparisons with statistics

// Empties the cache and sets its limit for one test case; restores the limit after.
struct CacheScope {
  explicit CacheScope(size_t limit) : previous(get_cpu_cache_limit()) {
    empty_cache(kCpu);
    set_cpu_cache_limit(limit);
  }
  ~CacheScope() {
    set_cpu_cache_limit(previous);
    empty_cache(kCpu);
  }
  size_t previous;
};

// The segments of free (cached) blocks, and the bytes of the segments holding live ones.
struct CacheView {
  std::set<uintptr_t> cached;
  int64_t cached_bytes = 0;
  int64_t live_segment_bytes = 0;
};

CacheView view() {
  CacheView v;
  for (const SegmentInfo& seg : memory_snapshot(kCpu)) {
    REQUIRE(seg.blocks.size() == 1);
    if (seg.blocks[0].allocated) {
      v.live_segment_bytes += static_cast<int64_t>(seg.size);
    } else {
      v.cached.insert(seg.address);
      v.cached_bytes += static_cast<int64_t>(seg.size);
    }
  }
  return v;
}

uintptr_t addr(void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST_CASE("a freed cpu block is reused by the next allocation of its size class",
          "[allocator][cpu][cache]") {
  CacheScope scope(64 * kMiB);
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  const MemoryStats m0 = memory_stats(kCpu);
  // 3 MiB + 64 after rounding: the class 3.5 MiB (2 MiB x 1.75).
  void* p = a.allocate(3 * kMiB + 5, s);
  std::memset(p, 1, 3 * kMiB + 5);
  const MemoryStats m1 = memory_stats(kCpu);
  CHECK(m1.reserved_bytes.current - m0.reserved_bytes.current == 7 * kStatMiB / 2);
  CHECK(m1.allocated_bytes.current - m0.allocated_bytes.current == 3 * kStatMiB + 64);
  CHECK(m1.requested_bytes.current - m0.requested_bytes.current == 3 * kStatMiB + 5);
  CHECK(m1.active_bytes.current - m0.active_bytes.current == 3 * kStatMiB + 64);
  CHECK(m1.num_segment_allocs - m0.num_segment_allocs == 1);

  a.free(p);
  const MemoryStats m2 = memory_stats(kCpu);
  CHECK(m2.allocated_bytes.current == m0.allocated_bytes.current);
  CHECK(m2.requested_bytes.current == m0.requested_bytes.current);
  CHECK(m2.active_bytes.current == m0.active_bytes.current);
  CHECK(m2.active_blocks.current == m0.active_blocks.current);
  CHECK(m2.reserved_bytes.current == m1.reserved_bytes.current);  // kept for reuse
  CHECK(m2.segments.current == m1.segments.current);
  CHECK(m2.num_segment_frees == m0.num_segment_frees);
  const CacheView cached = view();
  CHECK(cached.cached == std::set<uintptr_t>{addr(p)});
  CHECK(cached.cached_bytes == 7 * kStatMiB / 2);

  // Another size of the same class: the same memory, nothing new reserved.
  void* q = a.allocate(3 * kMiB + 300 * 1024, s);
  CHECK(q == p);
  const MemoryStats m3 = memory_stats(kCpu);
  CHECK(m3.reserved_bytes.current == m1.reserved_bytes.current);
  CHECK(m3.num_segment_allocs == m1.num_segment_allocs);
  CHECK(m3.num_cache_hits - m0.num_cache_hits == 1);
  CHECK(m3.allocated_bytes.current - m0.allocated_bytes.current == 3 * kStatMiB + 300 * 1024);
  CHECK(m3.requested_bytes.current - m0.requested_bytes.current == 3 * kStatMiB + 300 * 1024);
  CHECK(view().cached.empty());

  // A size of another class does not take it.
  void* r = a.allocate(kMiB, s);
  CHECK(r != q);
  CHECK(memory_stats(kCpu).num_segment_allocs == m1.num_segment_allocs + 1);
  a.free(r);
  // Of two cached blocks of a class, the one freed last is handed out first.
  void* q2 = a.allocate(3 * kMiB + 1, s);
  CHECK(q2 != q);
  a.free(q2);
  a.free(q);
  void* again = a.allocate(3 * kMiB + 1, s);
  CHECK(again == q);
  a.free(again);
}

TEST_CASE("the cpu cache keeps at most its limit, dropping the least recently freed first",
          "[allocator][cpu][cache][limit]") {
  CacheScope scope(3 * kMiB);
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  const MemoryStats m0 = memory_stats(kCpu);
  const auto within_limit = [&] {
    const CacheView v = view();
    const MemoryStats m = memory_stats(kCpu);
    CHECK(v.cached_bytes <= static_cast<int64_t>(get_cpu_cache_limit()));
    CHECK(m.reserved_bytes.current - m0.reserved_bytes.current ==
          v.cached_bytes + v.live_segment_bytes);
  };
  std::vector<void*> p;
  for (int i = 0; i < 4; ++i) p.push_back(a.allocate(kMiB, s));
  for (int i = 0; i < 3; ++i) a.free(p[i]);
  within_limit();
  CHECK(memory_stats(kCpu).reserved_bytes.current - m0.reserved_bytes.current == 4 * kStatMiB);
  a.free(p[3]);  // one block past the limit: p[0], freed first, goes back
  within_limit();
  const MemoryStats m1 = memory_stats(kCpu);
  CHECK(m1.reserved_bytes.current - m0.reserved_bytes.current == 3 * kStatMiB);
  CHECK(m1.num_segment_frees - m0.num_segment_frees == 1);
  CHECK(view().cached == std::set<uintptr_t>{addr(p[1]), addr(p[2]), addr(p[3])});

  // A block larger than the whole limit is never kept.
  void* big = a.allocate(4 * kMiB, s);
  a.free(big);
  within_limit();
  CHECK(memory_stats(kCpu).num_segment_frees - m1.num_segment_frees == 1);
  CHECK(view().cached.count(addr(big)) == 0);

  // Lowering the limit drops the oldest at once; raising it drops nothing.
  set_cpu_cache_limit(kMiB);
  CHECK(get_cpu_cache_limit() == kMiB);
  within_limit();
  CHECK(view().cached == std::set<uintptr_t>{addr(p[3])});
  set_cpu_cache_limit(8 * kMiB);
  CHECK(view().cached == std::set<uintptr_t>{addr(p[3])});

  // 0 keeps nothing: a free goes straight back.
  set_cpu_cache_limit(0);
  CHECK(view().cached.empty());
  const MemoryStats m2 = memory_stats(kCpu);
  a.free(a.allocate(kMiB, s));
  const MemoryStats m3 = memory_stats(kCpu);
  CHECK(m3.reserved_bytes.current == m2.reserved_bytes.current);
  CHECK(m3.num_cache_hits == m2.num_cache_hits);
  CHECK(m3.reserved_bytes.current == m0.reserved_bytes.current);

  // Across size classes too, the least recently freed block goes first.
  set_cpu_cache_limit(3 * kMiB);
  void* x = a.allocate(kMiB, s);
  void* y = a.allocate(kMiB + kMiB / 4, s);
  void* z = a.allocate(kMiB, s);
  a.free(x);
  a.free(y);
  a.free(z);  // 3.25 MiB: x goes
  within_limit();
  CHECK(view().cached == std::set<uintptr_t>{addr(y), addr(z)});
}

TEST_CASE("empty_cache returns every cached cpu block, and only those",
          "[allocator][cpu][cache]") {
  CacheScope scope(64 * kMiB);
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  const MemoryStats m0 = memory_stats(kCpu);
  void* live = a.allocate(2 * kMiB, s);
  for (size_t bytes : {size_t{100}, size_t{5000}, kMiB, 3 * kMiB}) a.free(a.allocate(bytes, s));
  CHECK(view().cached.size() == 4);
  empty_cache(kCpu);
  const MemoryStats m1 = memory_stats(kCpu);
  CHECK(view().cached.empty());
  CHECK(m1.reserved_bytes.current - m0.reserved_bytes.current == 2 * kStatMiB);  // the live one
  CHECK(m1.segments.current - m0.segments.current == 1);
  CHECK(m1.num_segment_frees - m0.num_segment_frees == 4);
  static_cast<char*>(live)[2 * kMiB - 1] = 7;  // still ours
  a.free(live);
}

TEST_CASE("the cpu cache limit has a default and is cpu's only",
          "[allocator][cpu][cache][limit]") {
  REQUIRE(std::getenv("STREAMGRAD_CPU_CACHE_BYTES") == nullptr);
  const size_t total = backend(DeviceType::kCpu).total_memory(0);
  CHECK(get_cpu_cache_limit() == std::min(DeviceAllocator::kCpuDefaultCacheBytes, total / 4));
  CHECK_THROWS_AS(allocator_for(Device("sim:0")).set_cache_limit(kMiB), DeviceError);
  CHECK_THROWS_WITH(allocator_for(Device("sim:0")).cache_limit(),
                    Catch::Contains("only cpu's cache is capped"));
}

TEST_CASE("every cpu block is 64-byte aligned, and its segment wastes at most a fifth",
          "[allocator][cpu][cache][alignment]") {
  CacheScope scope(64 * kMiB);
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  for (size_t bytes : {size_t{1}, size_t{7}, size_t{64}, size_t{65}, size_t{100}, size_t{1000},
                       size_t{1024}, size_t{1025}, size_t{1281}, size_t{4097}, size_t{100000},
                       kMiB, kMiB + 1, 5 * kMiB + 3}) {
    INFO(bytes << " bytes");
    for (int round = 0; round < 2; ++round) {  // a new segment, then a cached one
      void* p = a.allocate(bytes, s);
      CHECK(addr(p) % 64 == 0);
      const size_t rounded = (bytes + 63) / 64 * 64;
      for (const SegmentInfo& seg : memory_snapshot(kCpu)) {
        if (seg.address != addr(p)) continue;
        CHECK(seg.blocks[0].size == rounded);
        CHECK(seg.size >= rounded);
        CHECK(seg.size * 4 <= rounded * 5);
      }
      a.free(p);
    }
  }
  CHECK(memory_stats(kCpu).num_cache_hits > 0);
}

TEST_CASE("threads allocating and freeing cpu blocks at once keep the statistics exact",
          "[allocator][cpu][cache][threads]") {
  CacheScope scope(4 * kMiB);  // small enough that some frees overflow it
  DeviceAllocator& a = allocator_for(kCpu);
  const MemoryStats m0 = memory_stats(kCpu);
  constexpr int kThreads = 8, kRounds = 300;
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Stream s = Stream::default_for(kCpu);
      const size_t sizes[] = {48, 700, 3000, 70000, 300000, kMiB + 5};
      for (int i = 0; i < kRounds; ++i) {
        const size_t n = sizes[(i + t) % 6];
        auto* p = static_cast<unsigned char*>(a.allocate(n, s));
        p[0] = p[n - 1] = static_cast<unsigned char>(t + 1);
        std::this_thread::yield();
        if (p[0] != t + 1 || p[n - 1] != t + 1) ++wrong[t];
        a.free(p);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(wrong[t] == 0);
  const MemoryStats m = memory_stats(kCpu);
  const int64_t allocs = m.num_allocs - m0.num_allocs;
  CHECK(allocs == kThreads * kRounds);
  CHECK(m.num_frees - m0.num_frees == allocs);
  CHECK((m.num_cache_hits - m0.num_cache_hits) + (m.num_segment_allocs - m0.num_segment_allocs) ==
        allocs);
  CHECK(m.allocated_bytes.current == m0.allocated_bytes.current);
  CHECK(m.requested_bytes.current == m0.requested_bytes.current);
  CHECK(m.active_bytes.current == m0.active_bytes.current);
  CHECK(m.segments.current - m0.segments.current ==
        (m.num_segment_allocs - m0.num_segment_allocs) -
            (m.num_segment_frees - m0.num_segment_frees));
  const CacheView v = view();
  CHECK(v.cached_bytes <= static_cast<int64_t>(4 * kMiB));
  CHECK(m.reserved_bytes.current - m0.reserved_bytes.current == v.cached_bytes);
}

TEST_CASE("a cpu miss past the memory fraction releases the cache before it fails",
          "[allocator][cpu][cache][fraction]") {
  CacheScope scope(64 * kMiB);
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  a.free(a.allocate(2 * kMiB, s));
  const MemoryStats m0 = memory_stats(kCpu);
  // Room for the live memory and 1.5 MiB more: not with the 2 MiB cached block too.
  const double total = static_cast<double>(backend(DeviceType::kCpu).total_memory(0));
  const int64_t live = m0.reserved_bytes.current - 2 * kStatMiB;
  set_per_process_memory_fraction((static_cast<double>(live) + 1.5 * kMiB) / total, kCpu);
  void* p = nullptr;
  CHECK_NOTHROW(p = a.allocate(kMiB + kMiB / 4, s));  // the class 1.25 MiB
  set_per_process_memory_fraction(1.0, kCpu);
  const MemoryStats m1 = memory_stats(kCpu);
  CHECK(m1.num_ooms == m0.num_ooms);
  CHECK(m1.num_segment_frees - m0.num_segment_frees == 1);
  CHECK(m1.reserved_bytes.current == live + 5 * kStatMiB / 4);
  a.free(p);
}

// Under AddressSanitizer a cached block is poisoned until it is handed out again, so a
// use after free is still reported; every build checks that the memory is reused.
TEST_CASE("a cached cpu block is poisoned for AddressSanitizer until it is reused",
          "[allocator][cpu][cache][asan]") {
  CacheScope scope(64 * kMiB);
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  const size_t n = kMiB + 100;  // rounded: kMiB + 128; segment: 1.25 MiB
  auto* p = static_cast<char*>(a.allocate(n, s));
  std::memset(p, 3, n);
#ifdef SG_TEST_ASAN
  CHECK_FALSE(__asan_address_is_poisoned(p));
  CHECK_FALSE(__asan_address_is_poisoned(p + kMiB + 127));
  CHECK(__asan_address_is_poisoned(p + kMiB + 128));  // past the block, as past a malloc
#endif
  a.free(p);
#ifdef SG_TEST_ASAN
  CHECK(__asan_address_is_poisoned(p));
  CHECK(__asan_address_is_poisoned(p + n / 2));
  CHECK(__asan_address_is_poisoned(p + n - 1));
  CHECK(__asan_region_is_poisoned(p, n) == p);
#endif
  auto* q = static_cast<char*>(a.allocate(kMiB + 64 * 3, s));
  CHECK(q == p);
#ifdef SG_TEST_ASAN
  CHECK(__asan_region_is_poisoned(q, kMiB + 64 * 3) == nullptr);
  CHECK(__asan_address_is_poisoned(q + kMiB + 64 * 3));
#endif
  q[kMiB + 64 * 3 - 1] = 1;
  a.free(q);
  empty_cache(kCpu);
}

}  // namespace
}  // namespace streamgrad

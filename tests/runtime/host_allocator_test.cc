// The caching host allocator behind pinned_alloc (runtime/memory/host_memory.h): a pinned block
// freed while a non-blocking copy (or a recorded stream) may still use it is not handed
// out again before that use completed; reuse after completion is a cache hit; statistics;
// host_empty_cache. Behaviour ported from the reference framework's CachingHostAllocator
// (test_cuda.py: a pinned buffer freed right after a non_blocking copy is not reused while
// the copy is pending; host memory stats count allocations, frees and cache hits).
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/runtime.h"
#include "tests/runtime/test_devices.h"

namespace streamgrad {
namespace {

const Device kDev("sim:0");
constexpr size_t kBytes = 64 * sizeof(float);

SimSchedulerOptions held_back() {  // nothing runs on sim streams until the host waits
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  return o;
}

void fill_floats(void* p, float first) {
  float* f = static_cast<float*>(p);
  for (int i = 0; i < 64; ++i) f[i] = first + static_cast<float>(i);
}

std::vector<float> read_floats(const void* dev, const Stream& s) {
  std::vector<float> out(64);
  StreamGuard g(s);
  copy_bytes(out.data(), "cpu", dev, kDev, kBytes);
  return out;
}

// Starts each case with an empty cache and zeroed counters.
struct Fresh {
  Fresh() {
    synchronize(kDev);
    host_empty_cache();
    reset_peak_host_memory_stats();
    reset_accumulated_host_memory_stats();
    base = host_memory_stats();
  }
  MemoryStats base;
};

TEST_CASE("a pinned block freed under a pending non-blocking copy is not handed out again",
          "[pinned][S8]") {
  SimSchedulerScope scope(held_back());
  Fresh f;
  const Stream side = Stream::create(kDev);
  Storage dev = Storage::allocate(kBytes, side);
  void* src = pinned_alloc(kBytes);
  fill_floats(src, 1);
  {
    StreamGuard g(side);
    copy_bytes(dev.data(), kDev, src, "cpu", kBytes, /*non_blocking=*/true);
  }
  REQUIRE_FALSE(side.query());  // the copy has not read the block yet
  pinned_free(src);
  void* next = pinned_alloc(kBytes);
  CHECK(next != src);
  fill_floats(next, -100);  // the new owner writes at once
  CHECK(host_memory_stats().num_deferred_frees == f.base.num_deferred_frees + 1);
  const std::vector<float> got = read_floats(dev.data(), side);
  CHECK(got[0] == 1.0f);
  CHECK(got[63] == 64.0f);
  pinned_free(next);
}

TEST_CASE("a pinned block freed after its copy completed is reused: a cache hit", "[pinned]") {
  for (const Device d : {Device("cpu"), kDev}) {
    Fresh f;
    const Stream s = current_stream(d);
    Storage dev = Storage::allocate(kBytes, d);
    void* src = pinned_alloc(kBytes);
    fill_floats(src, 1);
    copy_bytes(dev.data(), d, src, "cpu", kBytes, /*non_blocking=*/true);
    s.synchronize();
    pinned_free(src);
    void* again = pinned_alloc(kBytes - 16);  // same rounded size
    CHECK(again == src);
    const MemoryStats m = host_memory_stats();
    CHECK(m.num_cache_hits == 1);
    CHECK(m.num_segment_allocs == 1);
    pinned_free(again);
  }
}

TEST_CASE("pinned_record_stream protects a block read by a kernel on another stream",
          "[pinned][S8]") {
  SimSchedulerScope scope(held_back());
  Fresh f;
  const Stream reader = Stream::create(kDev);
  int* p = static_cast<int*>(pinned_alloc(sizeof(int)));
  *p = 42;
  auto seen = std::make_shared<int>(0);
  const MemRange r[] = {{p, sizeof(int)}};
  launch(reader, {"pinned_reader", r, {}}, [p, seen] { *seen = *p; });
  pinned_record_stream(p + 0, reader);
  pinned_free(p);
  int* next = static_cast<int*>(pinned_alloc(sizeof(int)));
  CHECK(next != p);
  *next = -1;
  reader.synchronize();
  CHECK(*seen == 42);
  int* later = static_cast<int*>(pinned_alloc(sizeof(int)));
  CHECK(later == p);  // the reader is done: the block is back in the cache
  pinned_free(next);
  pinned_free(later);
}

TEST_CASE("host memory statistics match hand-computed byte counts", "[pinned][stats]") {
  SimSchedulerScope scope(held_back());
  Fresh f;
  REQUIRE(f.base.allocated_bytes.current == 0);
  REQUIRE(f.base.num_allocs == 0);
  void* a = pinned_alloc(1000);  // rounds to 1024
  void* b = pinned_alloc(100);   // rounds to 512
  MemoryStats m = host_memory_stats();
  CHECK(m.allocated_bytes.current == 1536);
  CHECK(m.requested_bytes.current == 1100);
  CHECK(m.reserved_bytes.current == 1536);
  CHECK(m.active_bytes.current == 1536);
  CHECK(m.segments.current == 2);
  CHECK(m.num_allocs == 2);
  CHECK(m.num_segment_allocs == 2);

  pinned_free(a);  // cached: still reserved
  m = host_memory_stats();
  CHECK(m.allocated_bytes.current == 512);
  CHECK(m.allocated_bytes.peak == 1536);
  CHECK(m.allocated_bytes.allocated == 1536);
  CHECK(m.allocated_bytes.freed == 1024);
  CHECK(m.reserved_bytes.current == 1536);
  CHECK(m.num_frees == 1);

  // A block freed under a pending copy stays active until the copy is done.
  const Stream s = Stream::create(kDev);
  Storage dev = Storage::allocate(512, s);
  {
    StreamGuard g(s);
    copy_bytes(dev.data(), kDev, b, "cpu", 100, /*non_blocking=*/true);
  }
  pinned_free(b);
  m = host_memory_stats();
  CHECK(m.allocated_bytes.current == 0);
  CHECK(m.active_bytes.current == 512);
  CHECK(m.active_blocks.current == 1);
  CHECK(m.num_deferred_frees == 1);
  s.synchronize();
  void* c = pinned_alloc(1024);  // notices the copy completed; reuses a's block
  m = host_memory_stats();
  CHECK(m.active_bytes.current == 1024);
  CHECK(m.num_cache_hits == 1);

  reset_peak_host_memory_stats();
  CHECK(host_memory_stats().allocated_bytes.peak == 1024);
  reset_accumulated_host_memory_stats();
  m = host_memory_stats();
  CHECK(m.num_allocs == 0);
  CHECK(m.num_frees == 0);
  CHECK(m.num_cache_hits == 0);
  CHECK(m.allocated_bytes.allocated == 0);
  CHECK(m.allocated_bytes.freed == 0);
  CHECK(m.allocated_bytes.current == 1024);  // current values stay
  CHECK(m.reserved_bytes.current == 1536);
  pinned_free(c);
}

TEST_CASE("host_empty_cache returns cached blocks, after pending copies ran", "[pinned]") {
  SimSchedulerScope scope(held_back());
  Fresh f;
  const Stream s = Stream::create(kDev);
  Storage dev = Storage::allocate(kBytes, s);
  void* cached = pinned_alloc(4096);
  pinned_free(cached);
  void* src = pinned_alloc(kBytes);
  fill_floats(src, 7);
  {
    StreamGuard g(s);
    copy_bytes(dev.data(), kDev, src, "cpu", kBytes, /*non_blocking=*/true);
  }
  pinned_free(src);
  CHECK(host_memory_stats().reserved_bytes.current == 4096 + 512);
  host_empty_cache();  // must let the copy read src before the memory goes
  const MemoryStats m = host_memory_stats();
  CHECK(m.reserved_bytes.current == 0);
  CHECK(m.segments.current == 0);
  CHECK(m.active_bytes.current == 0);
  CHECK(m.num_segment_frees == 2);
  CHECK(read_floats(dev.data(), s)[63] == 70.0f);
}

TEST_CASE("pinned memory misuse is a clear error", "[pinned][errors]") {
  Fresh f;
  int on_stack = 0;
  CHECK_THROWS_WITH(pinned_free(&on_stack), Catch::Contains("not a live block"));
  CHECK_THROWS_AS(pinned_record_stream(&on_stack, current_stream(kDev)), ValueError);
  void* p = pinned_alloc(64);
  CHECK_THROWS_AS(pinned_free(static_cast<char*>(p) + 8), ValueError);  // not its start
  pinned_free(p);
  CHECK_THROWS_AS(pinned_free(p), ValueError);  // twice
  CHECK(host_memory_stats().num_frees == 1);
}

}  // namespace
}  // namespace streamgrad

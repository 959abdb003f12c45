// STREAMGRAD_ALLOC_CONF=expandable_segments:True on sim (this target's environment, with
// 16 MiB per sim device): one segment per device that grows at its end, for requests over
// 1 MiB. A growing request size reuses the same bytes instead of stranding a segment per
// size; small requests keep segments of their own; a segment still
// partly in use grows where a new segment would not fit; empty_cache() unmaps the free
// pages at the end and they map again later; the end block of a stream with queued work
// is not grown for another stream, and a range unmapped while work was queued is mapped
// again only once that work ran (values and the stream sanitizer, deterministic
// scheduler; and many times under the threaded one).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "runtime/observe/stream_sanitizer.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
const Device kDev("sim:0");

void start_empty() {
  synchronize(kDev);
  empty_cache(kDev);
  reset_peak_stats(kDev);
  REQUIRE(memory_stats(kDev).reserved_bytes.current == 0);
}

// The deterministic scheduler runs nothing until the host waits.
SimSchedulerOptions runs_when_waited() {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  return o;
}

int64_t reserved() { return memory_stats(kDev).reserved_bytes.current; }

// Writes `value` into the int at p, as work on s that declares the write.
void write_on(const Stream& s, void* p, int value) {
  const MemRange w[] = {{p, sizeof(int)}};
  int* q = static_cast<int*>(p);
  launch(s, {"write", {}, w}, [q, value] { *q = value; });
}

// A block of `bytes` on s, written at `at` there and freed while that write is still
// queued (under the deterministic scheduler); returns its address.
void* freed_while_written(const Stream& s, size_t bytes, size_t at, int value) {
  Storage a = Storage::allocate(bytes, s);
  write_on(s, static_cast<char*>(a.data()) + at, value);
  return a.data();
}

int read_on(const Stream& s, const void* p) {
  int v = 0;
  StreamGuard on(s);
  copy_bytes(&v, Device("cpu"), p, kDev, sizeof(int));
  return v;
}

TEST_CASE("a growing request size reuses one segment", "[allocator][expandable]") {
  start_empty();
  const Stream s = current_stream(kDev);
  for (size_t mib = 2; mib <= 8; ++mib) {
    Storage a = Storage::allocate(mib * kMiB, s);
    write_on(s, static_cast<char*>(a.data()) + mib * kMiB - sizeof(int), static_cast<int>(mib));
    CHECK(read_on(s, static_cast<char*>(a.data()) + mib * kMiB - sizeof(int)) ==
          static_cast<int>(mib));
  }
  // Whole segments would have reserved 2 + 3 + ... + 8 MiB, past the device's 16.
  const MemoryStats st = memory_stats(kDev);
  CHECK(st.reserved_bytes.peak == static_cast<int64_t>(8 * kMiB));
  CHECK(st.segments.current == 1);
  const std::vector<SegmentInfo> snap = memory_snapshot(kDev);
  REQUIRE(snap.size() == 1);
  CHECK(snap[0].size == 8 * kMiB);
  size_t covered = 0;
  for (const BlockInfo& b : snap[0].blocks) {
    CHECK(b.address == snap[0].address + covered);
    covered += b.size;
  }
  CHECK(covered == 8 * kMiB);
}

TEST_CASE("requests up to 1 MiB keep segments of their own", "[allocator][expandable]") {
  start_empty();
  const Stream s = current_stream(kDev);
  Storage small = Storage::allocate(kMiB / 2, s);
  Storage large = Storage::allocate(3 * kMiB, s);
  const std::vector<SegmentInfo> snap = memory_snapshot(kDev);
  REQUIRE(snap.size() == 2);
  CHECK(reserved() == static_cast<int64_t>(kMiB / 2 + 4 * kMiB));  // the range: whole pages
  // Cached blocks are found wherever they are: the range's free MiB behind `large`.
  Storage other = Storage::allocate(kMiB, s);
  CHECK(static_cast<char*>(other.data()) == static_cast<char*>(large.data()) + 3 * kMiB);
}

TEST_CASE("a segment still partly in use grows where a new one would not fit",
          "[allocator][expandable]") {
  start_empty();
  const Stream s = current_stream(kDev);
  { Storage z = Storage::allocate(14 * kMiB, s); }
  Storage x = Storage::allocate(8 * kMiB, s);  // the first 8 MiB of the 14; 6 free behind
  Storage y = Storage::allocate(8 * kMiB, s);  // 6 free + 2 mapped: the device's 16 MiB
  CHECK(static_cast<char*>(y.data()) == static_cast<char*>(x.data()) + 8 * kMiB);
  CHECK(reserved() == static_cast<int64_t>(16 * kMiB));
  const int64_t ooms = memory_stats(kDev).num_ooms;
  CHECK_THROWS_AS(Storage::allocate(kMiB, s), OutOfMemoryError);
  CHECK(memory_stats(kDev).num_ooms == ooms + 1);
  CHECK(reserved() == static_cast<int64_t>(16 * kMiB));
}

TEST_CASE("empty_cache unmaps the free pages at the end, which map again",
          "[allocator][expandable]") {
  start_empty();
  const Stream s = current_stream(kDev);
  Storage x = Storage::allocate(3 * kMiB / 2, s);
  { Storage big = Storage::allocate(9 * kMiB, s); }
  CHECK(reserved() == static_cast<int64_t>(12 * kMiB));  // 2 MiB for x, 10 more for big
  empty_cache(kDev);
  // x's page stays, with the free half MiB that shares it.
  CHECK(reserved() == static_cast<int64_t>(2 * kMiB));
  CHECK(memory_stats(kDev).segments.current == 1);
  Storage again = Storage::allocate(5 * kMiB, s);
  CHECK(static_cast<char*>(again.data()) == static_cast<char*>(x.data()) + 3 * kMiB / 2);
  write_on(s, static_cast<char*>(again.data()) + 5 * kMiB - sizeof(int), 7);
  CHECK(read_on(s, static_cast<char*>(again.data()) + 5 * kMiB - sizeof(int)) == 7);
  x = Storage();
  again = Storage();
  empty_cache(kDev);
  CHECK(reserved() == 0);
  CHECK(memory_stats(kDev).segments.current == 0);
}

TEST_CASE("the end block of a busy stream is not grown for another stream",
          "[allocator][expandable][S8]") {
  SimSchedulerScope scope(runs_when_waited());
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  start_empty();
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  void* first = freed_while_written(s, 3 * kMiB / 2, 0, 1);
  // s's free page would hold it, but s's write is still queued there.
  Storage b = Storage::allocate(3 * kMiB / 2, t);
  const char* lo = static_cast<char*>(first);
  CHECK(static_cast<char*>(b.data()) >= lo + 2 * kMiB);  // past s's page, not over it
  write_on(t, b.data(), 2);
  s.synchronize();
  // s ran dry: its page (the block and the free half MiB behind it) is everyone's now,
  // and the best fit for 2 MiB (t's own free half MiB behind b is too small).
  Storage c = Storage::allocate(2 * kMiB, t);
  CHECK(c.data() == first);
  write_on(t, c.data(), 3);
  CHECK(read_on(t, b.data()) == 2);
  CHECK(read_on(t, c.data()) == 3);
  synchronize(kDev);
  const auto found = san.findings();
  CHECK(found.empty());
  if (!found.empty()) WARN(found[0].message);
}

TEST_CASE("pages unmapped while work was queued map again only after it ran",
          "[allocator][expandable][S8]") {
  SimSchedulerScope scope(runs_when_waited());
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  start_empty();
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  void* first = freed_while_written(s, 4 * kMiB, kMiB, 1);
  empty_cache(kDev);  // s's free pages go, once s's write ran
  CHECK(reserved() == 0);
  CHECK_FALSE(s.query());
  Storage b = Storage::allocate(4 * kMiB, t);
  CHECK(b.data() == first);  // the same range, mapped again...
  CHECK(s.query());          // ... after s's write ran
  write_on(t, static_cast<char*>(b.data()) + kMiB, 2);
  CHECK(read_on(t, static_cast<char*>(b.data()) + kMiB) == 2);
  synchronize(kDev);  // s's write, had it still been queued, would land in b now
  CHECK(read_on(t, static_cast<char*>(b.data()) + kMiB) == 2);
  CHECK(san.findings().empty());
}

TEST_CASE("streams sharing a growing segment keep their values under the threaded scheduler",
          "[allocator][expandable][S8]") {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kThreaded;
  SimSchedulerScope scope(o);
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  for (int round = 0; round < 30; ++round) {
    start_empty();
    const Stream& first = round % 2 == 0 ? s : t;
    const Stream& second = round % 2 == 0 ? t : s;
    { Storage a = Storage::allocate(3 * kMiB / 2, first); write_on(first, a.data(), round); }
    Storage b = Storage::allocate(static_cast<size_t>(2 + round % 3) * kMiB, second);
    write_on(second, b.data(), -round);
    CHECK(read_on(second, b.data()) == -round);
  }
  synchronize(kDev);
  const auto found = san.findings();
  CHECK(found.empty());
  if (!found.empty()) WARN(found[0].message);
}

}  // namespace
}  // namespace streamgrad

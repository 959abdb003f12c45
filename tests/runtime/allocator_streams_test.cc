// The caching allocator across streams: a block freed on a stream is reused by another
// stream once the allocator has seen its stream run dry, or pass the share marker a
// miss recorded on it while that stream keeps working, never before (values and the
// stream sanitizer both say so under the adversarial scheduler), and streams that come
// and go reuse one another's memory instead of each reserving its own. What the allocator
// learns by looking (a stream idle, a record_stream event complete) orders the reuse of
// the block for the sanitizer and nothing else. On sim:1, as
// allocator_test, so that byte counts are this file's alone.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <thread>

#include "runtime/observe/stream_sanitizer.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kDev("sim:1");

SimSchedulerOptions scheduler(SimSchedulerKind kind) {
  SimSchedulerOptions o;
  o.kind = kind;
  o.policy = SimPolicy::kAdversarial;
  return o;
}

void start_empty() {
  synchronize(kDev);
  empty_cache(kDev);
  reset_peak_stats(kDev);
  REQUIRE(memory_stats(kDev).reserved_bytes.current == 0);
}

// Writes `value` into the int at p, as work on s that declares the write.
void write_on(const Stream& s, void* p, int value) {
  const MemRange w[] = {{p, sizeof(int)}};
  int* q = static_cast<int*>(p);
  launch(s, {"write", {}, w}, [q, value] { *q = value; });
}

// A block of `bytes` on s, written there and freed while that write is still queued (under
// the deterministic scheduler); returns its address.
void* freed_while_written(const Stream& s, size_t bytes, int value) {
  Storage a = Storage::allocate(bytes, s);
  write_on(s, a.data(), value);
  return a.data();
}

TEST_CASE("a block freed on a busy stream goes to another stream only once it ran dry",
          "[allocator][S8]") {
  SimSchedulerScope scope(scheduler(SimSchedulerKind::kDeterministic));  // runs when waited
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  start_empty();
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  void* first = freed_while_written(s, 4096, 1);
  Storage early = Storage::allocate(4096, t);
  CHECK(early.data() != first);  // reuse now would let t's work run before s's write
  write_on(t, early.data(), 3);
  s.synchronize();
  Storage later = Storage::allocate(4096, t);
  CHECK(later.data() == first);
  write_on(t, later.data(), 2);
  int seen[2] = {0, 0};
  {
    StreamGuard on(t);
    copy_bytes(&seen[0], Device("cpu"), early.data(), kDev, sizeof(int));
    copy_bytes(&seen[1], Device("cpu"), later.data(), kDev, sizeof(int));
  }
  CHECK(seen[0] == 3);  // s's late write would have overwritten it
  CHECK(seen[1] == 2);
  CHECK(san.findings().empty());
  CHECK(memory_stats(kDev).reserved_bytes.peak == 2 * 4096);
}

// A stream that is never idle (a training loop whose host runs ahead) must not keep its
// free blocks to itself: the first miss on t records a marker on s, and once s passed it
// the next miss takes what s had freed before it, and nothing s freed after it. The
// deterministic scheduler runs s exactly up to `passed`, so the addresses are known; the
// threaded one runs the same program with whatever timing, values and sanitizer checked.
void busy_stream_program(bool deterministic) {
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  start_empty();
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  void* before = freed_while_written(s, 4096, 1);
  Storage miss = Storage::allocate(4096, t);  // s busy: a new segment, and a marker on s
  Storage again = Storage::allocate(4096, t);  // the marker has not run yet
  if (deterministic) {
    CHECK(miss.data() != before);
    CHECK(again.data() != before);
  }
  Event passed;
  passed.record(s);  // after the marker
  void* after = freed_while_written(s, 8192, 4);  // after the marker, behind `passed`
  Storage busy = Storage::allocate(16384, s);  // larger than s's free blocks: not one of them
  write_on(s, busy.data(), 5);                  // s stays busy past `passed`
  passed.synchronize();                         // deterministic: runs s up to `passed` only
  if (deterministic) REQUIRE_FALSE(s.query());
  Storage reused = Storage::allocate(4096, t);
  write_on(t, reused.data(), 2);
  Storage not_yet = Storage::allocate(8192, t);
  write_on(t, not_yet.data(), 3);
  if (deterministic) {
    CHECK(reused.data() == before);
    CHECK(not_yet.data() != after);  // s has not passed the free of `after`
    // 4 KiB: `before`, `miss`, `again`; 8 KiB: `after`, `not_yet`; 16 KiB: `busy`.
    CHECK(memory_stats(kDev).reserved_bytes.peak == 3 * 4096 + 2 * 8192 + 16384);
  }
  int seen[2] = {0, 0};
  {
    StreamGuard on(t);
    copy_bytes(&seen[0], Device("cpu"), reused.data(), kDev, sizeof(int));
    copy_bytes(&seen[1], Device("cpu"), not_yet.data(), kDev, sizeof(int));
  }
  CHECK(seen[0] == 2);
  CHECK(seen[1] == 3);  // s's write of `after` would have overwritten it
  CHECK(san.findings().empty());
  synchronize(kDev);
}

TEST_CASE("a block freed on a stream that stays busy goes to another stream once that "
          "stream passed the free", "[allocator][S8]") {
  {
    SimSchedulerScope scope(scheduler(SimSchedulerKind::kDeterministic));  // runs when waited
    busy_stream_program(true);
  }
  SimSchedulerScope scope(scheduler(SimSchedulerKind::kThreaded));
  for (int i = 0; i < 30; ++i) busy_stream_program(false);
}

// Splitting and merging must not move a block's free to before the marker: the part left
// of a block freed after the marker, and a block freed before it merged with one freed
// after, stay s's.
TEST_CASE("a share marker covers split and merged blocks only for what was freed before it",
          "[allocator][S8]") {
  SimSchedulerScope scope(scheduler(SimSchedulerKind::kDeterministic));  // runs when waited
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  start_empty();
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  { Storage whole = Storage::allocate(8192, s); }  // one segment for the merge, cached on s
  Storage left = Storage::allocate(4096, s), right = Storage::allocate(4096, s);
  REQUIRE(static_cast<char*>(right.data()) == static_cast<char*>(left.data()) + 4096);
  write_on(s, left.data(), 0);
  left = Storage();                          // freed before the marker
  Storage miss = Storage::allocate(65536, t);  // s busy with free blocks: a marker on s
  Event passed;
  passed.record(s);
  void* merged = right.data();
  write_on(s, merged, 1);
  right = Storage();  // freed after the marker; merges with `left`
  void* split;
  {
    Storage x = Storage::allocate(16384, s);  // a new segment
    split = static_cast<char*>(x.data()) + 12288;
    write_on(s, split, 2);
  }  // freed after the marker
  Storage head = Storage::allocate(12288, s);  // x's first 12 KiB: its last 4 stay free
  Storage busy = Storage::allocate(32768, s);
  write_on(s, busy.data(), 3);
  passed.synchronize();  // s past the marker, its writes to `merged` and `split` queued
  REQUIRE_FALSE(s.query());
  Storage a = Storage::allocate(8192, t), b = Storage::allocate(4096, t);
  CHECK(static_cast<char*>(a.data()) + 4096 != merged);
  CHECK(b.data() != split);
  write_on(t, static_cast<char*>(a.data()) + 4096, 4);
  write_on(t, b.data(), 5);
  synchronize(kDev);
  CHECK(san.findings().empty());
}

TEST_CASE("a thousand short-lived streams reuse one another's memory", "[allocator]") {
  const SimSchedulerKind kind =
      GENERATE(SimSchedulerKind::kDeterministic, SimSchedulerKind::kThreaded);
  SimSchedulerScope scope(scheduler(kind));
  start_empty();
  constexpr size_t kBytes = 64 * 1024;
  for (int i = 0; i < 1000; ++i) {
    const Stream s = Stream::create(kDev);  // a request's stream: used, waited for, dropped
    {
      Storage a = Storage::allocate(kBytes, s);
      write_on(s, a.data(), i);
    }
    s.synchronize();
  }
  // One segment serves them all (each stream kept its own before: 1,000 segments).
  CHECK(memory_stats(kDev).reserved_bytes.peak == kBytes);
}

TEST_CASE("blocks of two streams in one segment stay apart until both are shared",
          "[allocator]") {
  SimSchedulerScope scope(scheduler(SimSchedulerKind::kDeterministic));
  start_empty();
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  { Storage whole = Storage::allocate(8192, s); }  // one 8 KiB segment, cached on s
  void* head;
  void* tail;
  {
    Storage a = Storage::allocate(4096, s);  // the first half, s's
    s.synchronize();
    Storage b = Storage::allocate(4096, t);  // the second half, shared and now t's
    head = a.data();
    tail = b.data();
    write_on(t, tail, 7);  // t stays busy: its half is t's alone once freed
  }
  REQUIRE(static_cast<char*>(tail) == static_cast<char*>(head) + 4096);
  // s's half is free on s, t's on t: an 8 KiB request on s fits in neither alone.
  Storage big = Storage::allocate(8192, s);
  CHECK(big.data() != head);
  t.synchronize();
  big = Storage();
  synchronize(kDev);
  empty_cache(kDev);  // both halves free: the whole segment goes back
  CHECK(memory_stats(kDev).reserved_bytes.current == 0);
}

TEST_CASE("a block freed between two free neighbours merges with both", "[allocator]") {
  start_empty();
  const Stream s = Stream::create(kDev);
  { Storage whole = Storage::allocate(3 * 4096, s); }  // one segment, cached on s
  Storage a = Storage::allocate(4096, s), b = Storage::allocate(4096, s),
          c = Storage::allocate(4096, s);
  void* start = a.data();
  REQUIRE(static_cast<char*>(c.data()) == static_cast<char*>(start) + 2 * 4096);
  a = Storage();
  c = Storage();
  b = Storage();  // joins a on its left, then c on its right: one free block again
  Storage again = Storage::allocate(3 * 4096, s);
  CHECK(again.data() == start);
  CHECK(memory_stats(kDev).reserved_bytes.peak == 3 * 4096);
}

// Whether the allocator happens to look while a stream is idle is timing; it must not
// decide whether the sanitizer sees the program's own missing waits.
void read_on(const Stream& t, const void* p) {
  const MemRange r[] = {{p, sizeof(int)}};
  launch(t, {"read", r, {}}, [] {});
}

// The sanitizer found exactly the read on `reader` of what `writer` wrote.
void expect_one_race(const StreamSanitizer& san, const Stream& reader, const Stream& writer) {
  const auto found = san.findings();
  REQUIRE(found.size() == 1);
  CHECK(found[0].current.stream == reader);
  CHECK(found[0].previous.stream == writer);
  CHECK(found[0].previous.op == "write");
  synchronize(kDev);
}

void wait_idle(const Stream& s) {
  while (!s.query()) std::this_thread::yield();  // the observers hear nothing of this
}

TEST_CASE("a stream seen idle orders the reuse of its freed memory and nothing else",
          "[allocator][sanitizer]") {
  SimSchedulerScope scope(scheduler(SimSchedulerKind::kThreaded));
  // Races on purpose: the process-wide sanitizer (STREAMGRAD_SANITIZE_STREAMS=1 in CI)
  // must not throw for them.
  SanitizerSuppression races_on_purpose;
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  start_empty();
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  Storage kept = Storage::allocate(4096, s);
  write_on(s, kept.data(), 5);
  void* first;
  {
    Storage freed = Storage::allocate(4096, s);
    first = freed.data();
    write_on(s, first, 1);
  }
  wait_idle(s);
  Storage reused = Storage::allocate(4096, t);  // a miss on t: s is seen idle, its block shared
  REQUIRE(reused.data() == first);
  write_on(t, reused.data(), 2);
  CHECK(san.findings().empty());
  read_on(t, kept.data());  // t never waited for s's write of `kept`
  expect_one_race(san, t, s);
}

TEST_CASE("a record_stream event seen complete orders the block's reuse and nothing else",
          "[allocator][sanitizer]") {
  SimSchedulerScope scope(scheduler(SimSchedulerKind::kThreaded));
  // Races on purpose: the process-wide sanitizer (STREAMGRAD_SANITIZE_STREAMS=1 in CI)
  // must not throw for them.
  SanitizerSuppression races_on_purpose;
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  start_empty();
  const Stream s = Stream::create(kDev), t = Stream::create(kDev), u = Stream::create(kDev);
  Storage theirs = Storage::allocate(4096, t);
  write_on(t, theirs.data(), 7);
  void* first;
  {
    Storage x = Storage::allocate(4096, s);
    first = x.data();
    write_on(s, first, 1);
    t.wait_stream(s);
    read_on(t, first);
    x.record_stream(t);
  }  // back on s's list once t passed this point
  wait_idle(t);
  wait_idle(s);
  Storage again = Storage::allocate(4096, s);  // polls t's event: complete
  REQUIRE(again.data() == first);
  write_on(s, again.data(), 2);
  CHECK(san.findings().empty());
  read_on(u, theirs.data());  // u never waited for t's write of `theirs`
  expect_one_race(san, u, t);
}

}  // namespace
}  // namespace streamgrad

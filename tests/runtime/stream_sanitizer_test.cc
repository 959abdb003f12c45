// The stream sanitizer: unordered accesses across streams are findings naming both
// accesses; every legitimate ordering (events, wait_stream, host syncs, record_stream with
// the allocator's events) silences them; reuse of freed memory and overlapping views are
// handled by byte range.
#include "runtime/observe/stream_sanitizer.h"

#include <catch2/catch.hpp>

#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kDev("sim:0");

// A kernel that writes (or reads) `bytes` bytes at `p` and does nothing: the sanitizer
// judges what launches declare, not what they do.
void touch(const Stream& s, const char* name, void* p, size_t bytes, bool write) {
  const MemRange r[] = {{p, bytes}};
  if (write) {
    launch(s, {name, {}, r}, [] {});
  } else {
    launch(s, {name, r, {}}, [] {});
  }
}

struct Fixture {
  // These tests race on purpose; the process-wide sanitizer (CI runs the suite under
  // STREAMGRAD_SANITIZE_STREAMS=1) must not throw for them.
  SanitizerSuppression races_on_purpose;
  Stream a = Stream::create(kDev);
  Stream b = Stream::create(kDev);
  Storage buf = Storage::allocate(64, a);
};

TEST_CASE("a read on another stream without ordering is a finding", "[sanitizer]") {
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  Fixture f;
  touch(f.a, "producer", f.buf.data(), 64, true);
  touch(f.b, "consumer", f.buf.data(), 64, false);
  const auto found = san.findings();
  REQUIRE(found.size() == 1);
  CHECK(found[0].current.op == "consumer");
  CHECK(found[0].current.stream == f.b);
  CHECK_FALSE(found[0].current.write);
  CHECK(found[0].previous.op == "producer");
  CHECK(found[0].previous.stream == f.a);
  CHECK(found[0].previous.write);
  CHECK(found[0].message.find("consumer on sim:0/s") != std::string::npos);
  CHECK(found[0].message.find("not ordered after producer") != std::string::npos);
  synchronize(kDev);
}

TEST_CASE("events, wait_stream and host syncs order accesses", "[sanitizer]") {
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  Fixture f;
  touch(f.a, "w1", f.buf.data(), 64, true);
  f.b.wait_stream(f.a);
  touch(f.b, "r1", f.buf.data(), 64, false);
  Event e;
  e.record(f.b);
  e.block(f.a);
  touch(f.a, "w2", f.buf.data(), 64, true);  // after the read on b: ordered by e
  f.a.synchronize();
  touch(f.b, "r2", f.buf.data(), 64, false);  // after the host saw w2 complete
  Event never;
  never.block(f.b);  // a never-recorded event orders nothing and reports nothing
  CHECK(san.findings().empty());
}

TEST_CASE("a write after an unordered read is a finding", "[sanitizer]") {
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  Fixture f;
  touch(f.a, "init", f.buf.data(), 64, true);
  f.b.wait_stream(f.a);
  touch(f.b, "reader", f.buf.data(), 64, false);
  touch(f.a, "overwrite", f.buf.data(), 64, true);
  const auto found = san.findings();
  REQUIRE(found.size() == 1);
  CHECK(found[0].current.op == "overwrite");
  CHECK(found[0].previous.op == "reader");
  CHECK_FALSE(found[0].previous.write);
  synchronize(kDev);
}

TEST_CASE("overlapping views are compared by byte range", "[sanitizer]") {
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  Fixture f;
  char* p = static_cast<char*>(f.buf.data());
  touch(f.a, "write_low", p, 8, true);
  touch(f.b, "read_high", p + 8, 8, false);  // disjoint: fine
  CHECK(san.findings().empty());
  touch(f.b, "read_overlap", p + 4, 8, false);  // overlaps bytes 4..8
  REQUIRE(san.findings().size() == 1);
  CHECK(san.findings()[0].current.op == "read_overlap");
  synchronize(kDev);
}

TEST_CASE("reuse of a freed block by an unordered stream is a finding", "[sanitizer][S8]") {
  // The reference sanitizer misses this: a buffer freed while another stream still reads
  // it, without record_stream, is handed to its stream's next allocation at once.
  SanitizerSuppression races_on_purpose;
  const Stream a = Stream::create(kDev), b = Stream::create(kDev);
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  void* first;
  {
    Storage x = Storage::allocate(256, a);
    first = x.data();
    touch(a, "fill_x", x.data(), 256, true);
    b.wait_stream(a);
    touch(b, "read_x_elsewhere", x.data(), 256, false);
  }  // freed without record_stream(b)
  Storage y = Storage::allocate(256, a);
  REQUIRE(y.data() == first);  // reused at once
  touch(a, "write_y", y.data(), 256, true);
  REQUIRE(san.findings().size() == 1);
  const SanitizerFinding reuse = san.findings()[0];
  CHECK(reuse.previous.op == "read_x_elsewhere");
  // Buffers are numbered in allocation order: x was #1, y (same bytes) is #2.
  CHECK(reuse.previous.buffer == 1);
  CHECK(reuse.current.buffer == 2);
  CHECK_THAT(reuse.message,
             Catch::Contains("write_y on sim:0/s") && Catch::Contains("of buffer #2") &&
                 Catch::Contains(", which read bytes") &&
                 Catch::Contains("Buffer #1 was freed and its memory handed out again as "
                                 "buffer #2 while sim:0/s"));
  synchronize(kDev);
  san.clear_findings();
  // With record_stream the block comes back only after b's event completes, which the
  // host observes: no finding.
  {
    Storage x = Storage::allocate(512, a);
    touch(a, "fill_x2", x.data(), 512, true);
    b.wait_stream(a);
    touch(b, "read_x2", x.data(), 512, false);
    x.record_stream(b);
  }
  b.synchronize();
  Storage z = Storage::allocate(512, a);
  touch(a, "write_z", z.data(), 512, true);
  CHECK(san.findings().empty());
  synchronize(kDev);
}

TEST_CASE("findings name the LaunchScope each access ran in, innermost first", "[sanitizer]") {
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  Fixture f;
  {
    LaunchScope outer("OuterNode");
    LaunchScope inner("MulBackward");
    touch(f.a, "producer", f.buf.data(), 64, true);
  }
  {
    LaunchScope other("AccumulateGrad");
    touch(f.b, "consumer", f.buf.data(), 64, false);
  }
  REQUIRE(current_launch_scope() == nullptr);  // scopes end with their C++ scope
  const auto found = san.findings();
  REQUIRE(found.size() == 1);
  CHECK(found[0].previous.node == "MulBackward");
  CHECK(found[0].current.node == "AccumulateGrad");
  CHECK_THAT(found[0].message, Catch::Contains("consumer (in AccumulateGrad) on sim:0/s") &&
                                   Catch::Contains("producer (in MulBackward) on sim:0/s"));
  synchronize(kDev);
}

TEST_CASE("memory returned to the device takes its history with it", "[sanitizer]") {
  const Stream a = Stream::create(kDev);
  empty_cache(kDev);
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  const size_t before = san.history_size();
  for (int round = 0; round < 3; ++round) {
    std::vector<Storage> live;
    // Distinct sizes: each gets a segment of its own, touched in two halves.
    for (size_t i = 1; i <= 50; ++i) {
      live.push_back(Storage::allocate(4096 * i, a));
      touch(a, "first_half", live.back().data(), 2048 * i, true);
      touch(a, "second_half", static_cast<char*>(live.back().data()) + 2048 * i, 2048 * i,
            false);
    }
    CHECK(san.history_size() >= before + 100);
    live.clear();
    a.synchronize();
    empty_cache(kDev);  // raw frees: the history of those bytes is gone
    CHECK(san.history_size() == before);
  }
  CHECK(san.findings().empty());
}

TEST_CASE("throw mode stops the racing launch", "[sanitizer]") {
  StreamSanitizer san(StreamSanitizer::Mode::kThrow);
  Fixture f;
  touch(f.a, "producer", f.buf.data(), 64, true);
  CHECK_THROWS_AS(touch(f.b, "consumer", f.buf.data(), 64, false), SanitizerError);
  CHECK_THROWS_WITH(touch(f.b, "consumer2", f.buf.data(), 64, false),
                    Catch::Contains("consumer2") && Catch::Contains("producer"));
  synchronize(kDev);
}

TEST_CASE("blocking copies through the current stream are ordered", "[sanitizer]") {
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  const Stream s = Stream::create(kDev);
  StreamGuard g(s);
  Storage d = Storage::allocate(16, kDev);
  int v[4] = {1, 2, 3, 4};
  copy_bytes(d.data(), kDev, v, Device("cpu"), 16);
  int back[4] = {};
  copy_bytes(back, Device("cpu"), d.data(), kDev, 16);
  Storage other = Storage::allocate(16, Device("sim:1"));
  copy_bytes(other.data(), "sim:1", d.data(), kDev, 16);  // orders both devices' streams
  copy_bytes(back, Device("cpu"), other.data(), "sim:1", 16);
  CHECK(back[3] == 4);
  CHECK(san.findings().empty());
}

}  // namespace
}  // namespace streamgrad

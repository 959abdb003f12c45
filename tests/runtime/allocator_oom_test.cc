// Out of memory on a sim device with a configured limit (the BUILD target sets
// STREAMGRAD_SIM_MEMORY_BYTES=1048576): a clear error with the byte counts, and an
// allocator that stays usable.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kDev("sim:0");

TEST_CASE("allocating past the device limit is an OutOfMemoryError", "[allocator][oom]") {
  REQUIRE(config().sim_memory_bytes == 1 << 20);
  Storage a = Storage::allocate(600 * 1024, kDev);
  const MemoryStats before = memory_stats(kDev);
  try {
    Storage b = Storage::allocate(600 * 1024, kDev);
    FAIL("allocation past the limit succeeded");
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    CHECK(e.requested_bytes() == 600 * 1024);
    CHECK(e.allocated_bytes() == 600 * 1024);
    CHECK(e.reserved_bytes() == 600 * 1024);
    CHECK(msg.find("sim:0: out of memory") != std::string::npos);
    CHECK(msg.find("600.00 KiB (614400 bytes)") != std::string::npos);
    CHECK(msg.find("STREAMGRAD_SIM_MEMORY_BYTES") != std::string::npos);
  }
  const MemoryStats after = memory_stats(kDev);
  CHECK(after.allocated_bytes.current == before.allocated_bytes.current);
  CHECK(after.reserved_bytes.current == before.reserved_bytes.current);
  CHECK(after.num_ooms == before.num_ooms + 1);
  // Still usable: smaller allocations succeed, and freeing makes room for the large one.
  Storage c = Storage::allocate(100 * 1024, kDev);
  CHECK(c.defined());
  a = Storage();
  c = Storage();
  Storage d = Storage::allocate(900 * 1024, kDev);  // needs the cached segments released
  CHECK(d.defined());
}

TEST_CASE("a cached block on another stream is released to satisfy an allocation",
          "[allocator][oom]") {
  synchronize(kDev);
  empty_cache(kDev);
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  { Storage a = Storage::allocate(700 * 1024, s); }  // cached on s
  Storage b = Storage::allocate(700 * 1024, t);     // t may not reuse it; it is freed instead
  CHECK(b.defined());
  CHECK(memory_stats(kDev).reserved_bytes.current == 700 * 1024);
}

TEST_CASE("out of memory, the allocator finds a block freed inside a partly used segment",
          "[allocator][oom]") {
  SimSchedulerOptions det;
  det.kind = SimSchedulerKind::kDeterministic;  // the reader's use stays queued until waited
  SimSchedulerScope scope(det);
  synchronize(kDev);
  empty_cache(kDev);
  const Stream s = Stream::create(kDev), reader = Stream::create(kDev);
  { Storage whole = Storage::allocate(768 * 1024, s); }  // one segment, cached on s
  Storage y = Storage::allocate(256 * 1024, s);          // its first quarter
  void* z_at;
  {
    Storage z = Storage::allocate(512 * 1024, s);  // the rest of it
    z_at = z.data();
    const MemRange r[] = {{z_at, 512 * 1024}};
    launch(reader, {"read_z", r, {}}, [] {});
    z.record_stream(reader);
  }  // freed, waiting for the reader: no new 512 KiB segment fits beside the 768 KiB one
  Storage w = Storage::allocate(512 * 1024, s);
  CHECK(w.data() == z_at);
  CHECK(memory_stats(kDev).reserved_bytes.current == 768 * 1024);
}

TEST_CASE("the out-of-memory message lists what each stream holds", "[allocator][oom]") {
  synchronize(kDev);
  empty_cache(kDev);
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  Storage a = Storage::allocate(600 * 1024, s);
  try {
    Storage b = Storage::allocate(600 * 1024, t);
    FAIL("allocation past the limit succeeded");
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("on stream " + t.str()) &&
                        Catch::Contains("(" + s.str() +
                                        ": 600.00 KiB (614400 bytes) allocated, 0 bytes cached)"));
  }
}

}  // namespace
}  // namespace streamgrad

// Out of memory on a sim device with a configured limit (the BUILD target sets
// STREAMGRAD_SIM_MEMORY_BYTES=1048576): a clear error with the byte counts, and an
// allocator that stays usable.
#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace streamgrad

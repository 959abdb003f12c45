// set_per_process_memory_fraction (as in the reference framework's
// torch.cuda.set_per_process_memory_fraction: allocations that would take the caching
// allocator's reserved memory past fraction * device total fail with an out-of-memory
// error, after cached blocks were released). The BUILD target sets
// STREAMGRAD_SIM_MEMORY_BYTES=1048576, so sim:0 has 1 MiB in total.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kDev("sim:0");

// Sets the fraction for one test case and restores "no limit" after it.
struct FractionScope {
  FractionScope(double fraction, Device d) : device(d) {
    synchronize(device);
    empty_cache(device);
    set_per_process_memory_fraction(fraction, device);
  }
  ~FractionScope() { set_per_process_memory_fraction(1.0, device); }
  Device device;
};

TEST_CASE("a fraction outside [0, 1] is a ValueError and changes nothing",
          "[allocator][fraction][errors]") {
  FractionScope scope(0.75, kDev);
  for (double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CHECK_THROWS_AS(set_per_process_memory_fraction(bad, kDev), ValueError);
  }
  CHECK_THROWS_WITH(set_per_process_memory_fraction(2, kDev),
                    Catch::Contains("outside [0, 1]") && Catch::Contains("sim:0"));
  CHECK(get_per_process_memory_fraction(kDev) == 0.75);
}

TEST_CASE("an allocation past the fraction limit is an OutOfMemoryError naming the limit",
          "[allocator][fraction][oom]") {
  REQUIRE(config().sim_memory_bytes == 1 << 20);
  FractionScope scope(0.5, kDev);  // 512 KiB of the 1 MiB device
  const Stream s = current_stream(kDev);
  Storage a = Storage::allocate(300 * 1024, s);
  const MemoryStats before = memory_stats(kDev);
  try {
    Storage b = Storage::allocate(300 * 1024, s);  // the device has room; the limit not
    FAIL("allocation past the fraction limit succeeded");
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("sim:0: out of memory") != std::string::npos);
    CHECK(msg.find("memory fraction 0.5") != std::string::npos);
    CHECK(msg.find("512.00 KiB (524288 bytes)") != std::string::npos);
    CHECK(msg.find("set_per_process_memory_fraction") != std::string::npos);
    CHECK(e.requested_bytes() == 300 * 1024);
    CHECK(e.reserved_bytes() == 300 * 1024);
  }
  const MemoryStats after = memory_stats(kDev);
  CHECK(after.allocated_bytes.current == before.allocated_bytes.current);
  CHECK(after.reserved_bytes.current == before.reserved_bytes.current);
  CHECK(after.num_allocs == before.num_allocs);
  CHECK(after.num_segment_allocs == before.num_segment_allocs);
  CHECK(after.num_ooms == before.num_ooms + 1);
  CHECK(memory_snapshot(kDev).size() == 1);
  // Raising the limit is what the message suggests, and it works.
  set_per_process_memory_fraction(0.75, kDev);
  Storage b = Storage::allocate(300 * 1024, s);
  CHECK(b.defined());
}

TEST_CASE("at the fraction limit cached segments are released and the allocation retried",
          "[allocator][fraction]") {
  FractionScope scope(0.5, kDev);
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  { Storage a = Storage::allocate(400 * 1024, s); }  // cached on s: t may not reuse it
  REQUIRE(memory_stats(kDev).reserved_bytes.current == 400 * 1024);
  const int64_t ooms = memory_stats(kDev).num_ooms;
  Storage b = Storage::allocate(400 * 1024, t);
  CHECK(b.defined());
  const MemoryStats m = memory_stats(kDev);
  CHECK(m.reserved_bytes.current == 400 * 1024);
  CHECK(m.num_ooms == ooms);
}

TEST_CASE("a zero fraction refuses every new segment, on cpu and sim",
          "[allocator][fraction][oom]") {
  for (const Device d : {Device("cpu"), kDev}) {
    FractionScope scope(0.0, d);
    CHECK_THROWS_AS(Storage::allocate(64, d), OutOfMemoryError);
    set_per_process_memory_fraction(1.0, d);
    CHECK(Storage::allocate(64, d).defined());
  }
}

}  // namespace
}  // namespace streamgrad

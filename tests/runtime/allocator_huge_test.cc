// A request larger than the device's whole memory, with no configured limit (the host's
// memory is the sim and cpu devices' total): OutOfMemoryError before any host allocation.
// Sanitizer runtimes abort on multi-TiB mallocs instead of returning null, so under
// --config=asan this test fails if the request reaches malloc.
#include <catch2/catch.hpp>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("more than the device's total memory is refused up front", "[allocator][oom]") {
  REQUIRE(config().sim_memory_bytes == 0);
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const size_t huge = size_t{1} << 50;  // 1 PiB
  REQUIRE(backend(d.type()).total_memory(d.is_cpu() ? 0 : d.index()) < huge);
  const MemoryStats before = memory_stats(d);
  try {
    Storage s = Storage::allocate(huge, d);
    FAIL("a 1 PiB allocation succeeded on " << d.str());
  } catch (const OutOfMemoryError& e) {
    CHECK(e.requested_bytes() == huge);
    CHECK(std::string(e.what()).find("device total") != std::string::npos);
  }
  const MemoryStats after = memory_stats(d);
  CHECK(after.reserved_bytes.current == before.reserved_bytes.current);
  CHECK(after.num_ooms == before.num_ooms + 1);
  Storage small = Storage::allocate(4096, d);  // still usable
  CHECK(small.defined());
}

}  // namespace
}  // namespace streamgrad

// STREAMGRAD_CPU_CACHE_BYTES (tests/runtime/BUILD sets it per target): a whole number of
// bytes is the cpu cache's limit until set_cpu_cache_limit changes it; anything else is a
// ValueError naming the variable.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kCpu("cpu");
constexpr size_t kMiB = size_t{1} << 20;

TEST_CASE("STREAMGRAD_CPU_CACHE_BYTES sets the cpu cache's limit", "[allocator][cpu][env]") {
  const std::string value = std::getenv("STREAMGRAD_CPU_CACHE_BYTES");
  if (value != "2097152") {
    CHECK_THROWS_AS(get_cpu_cache_limit(), ValueError);
    CHECK_THROWS_WITH(get_cpu_cache_limit(),
                      Catch::Contains("STREAMGRAD_CPU_CACHE_BYTES=" + value +
                                      " is not a valid whole number"));
    return;
  }
  CHECK(get_cpu_cache_limit() == 2 * kMiB);
  DeviceAllocator& a = allocator_for(kCpu);
  const Stream s = Stream::default_for(kCpu);
  const MemoryStats m0 = memory_stats(kCpu);
  a.free(a.allocate(3 * kMiB, s));  // more than the limit: not kept
  const MemoryStats m1 = memory_stats(kCpu);
  CHECK(m1.reserved_bytes.current == m0.reserved_bytes.current);
  a.free(a.allocate(2 * kMiB, s));  // exactly the limit: kept
  CHECK(memory_stats(kCpu).reserved_bytes.current - m1.reserved_bytes.current == 2 * kMiB);
  set_cpu_cache_limit(4 * kMiB);  // the setter overrides the variable
  CHECK(get_cpu_cache_limit() == 4 * kMiB);
  a.free(a.allocate(3 * kMiB, s));  // kept; the 2 MiB block, freed earlier, makes room
  CHECK(memory_stats(kCpu).reserved_bytes.current - m1.reserved_bytes.current == 3 * kMiB);
}

}  // namespace
}  // namespace streamgrad

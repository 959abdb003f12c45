// A malformed STREAMGRAD_NUM_THREADS or STREAMGRAD_CPU_CAPABILITY (tests/runtime/BUILD sets
// one per target) is a ValueError naming the variable and the values it takes.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("a malformed setting is a ValueError naming it", "[cpu_settings]") {
  if (std::getenv("STREAMGRAD_NUM_THREADS") != nullptr) {
    CHECK_THROWS_AS(get_num_threads(), ValueError);
    CHECK_THROWS_WITH(get_num_threads(), Contains("STREAMGRAD_NUM_THREADS=0 must be in [1, 256]"));
  } else {
    REQUIRE(std::getenv("STREAMGRAD_CPU_CAPABILITY") != nullptr);
    CHECK_THROWS_AS(cpu_capability(), ValueError);
    CHECK_THROWS_WITH(cpu_capability(),
                      Contains("STREAMGRAD_CPU_CAPABILITY=sse9 is not a level; use default, "
                               "avx2 or avx512"));
  }
}

}  // namespace
}  // namespace streamgrad

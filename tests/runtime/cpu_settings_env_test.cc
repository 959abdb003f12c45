// STREAMGRAD_NUM_THREADS and STREAMGRAD_CPU_CAPABILITY (set in tests/runtime/BUILD) are the
// settings' starting values, which the setters override.
#include <catch2/catch.hpp>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("the environment sets the starting thread count and level", "[cpu_settings]") {
  CHECK(get_num_threads() == 3);
  CHECK(cpu_capability() == CpuCapability::kDefault);
  set_num_threads(5);
  CHECK(get_num_threads() == 5);
  set_cpu_capability(machine_cpu_capability());
  CHECK(cpu_capability() == machine_cpu_capability());
}

}  // namespace
}  // namespace streamgrad

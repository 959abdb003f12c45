// STREAMGRAD_NUM_THREADS, STREAMGRAD_CPU_CAPABILITY and STREAMGRAD_ALLOW_TF32 (set in
// tests/runtime/BUILD) are the settings' starting values, which the setters override.
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

TEST_CASE("STREAMGRAD_ALLOW_TF32 sets the starting TF32 switches", "[cuda_settings]") {
  CHECK(matmul_allow_tf32());
  CHECK(cudnn_allow_tf32());
  set_cudnn_allow_tf32(false);
  CHECK_FALSE(cudnn_allow_tf32());
  CHECK(matmul_allow_tf32());
  set_matmul_allow_tf32(false);
  CHECK_FALSE(matmul_allow_tf32());
  set_matmul_allow_tf32(true);
  CHECK(matmul_allow_tf32());
}

}  // namespace
}  // namespace streamgrad

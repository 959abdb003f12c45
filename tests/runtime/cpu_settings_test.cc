// The cpu kernels' settings (runtime/backend/cpu_settings.h) without streamgrad's variables: the
// machine's level by default, lower levels settable and higher ones refused, thread counts
// settable within [1, kMaxThreads], defaulting to OPENBLAS_NUM_THREADS or the CPUs this
// process may use; the idle threads' spin settable within [0, kMaxSpinUs], starting from
// STREAMGRAD_THREAD_SPIN_US (the hidden "[spin_env]" case, run by
// cpu_settings_spin_env_test.sh) or kDefaultSpinUs.
#include <sched.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <thread>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("TF32 for float32 cuda matmuls and convolutions is off unless asked for",
          "[cuda_settings]") {
  CHECK_FALSE(matmul_allow_tf32());
  CHECK_FALSE(cudnn_allow_tf32());
  set_matmul_allow_tf32(true);
  CHECK(matmul_allow_tf32());
  CHECK_FALSE(cudnn_allow_tf32());  // two switches, as torch.backends.cuda and .cudnn
  set_cudnn_allow_tf32(true);
  CHECK(cudnn_allow_tf32());
  set_matmul_allow_tf32(false);
  CHECK_FALSE(matmul_allow_tf32());
  CHECK(cudnn_allow_tf32());
  set_cudnn_allow_tf32(false);
  CHECK_FALSE(cudnn_allow_tf32());
}

TEST_CASE("the level defaults to the machine's and names itself", "[cpu_settings]") {
  CHECK(cpu_capability() == machine_cpu_capability());
  CHECK(std::string(cpu_capability_name(CpuCapability::kDefault)) == "default");
  CHECK(std::string(cpu_capability_name(CpuCapability::kAvx2)) == "avx2");
  CHECK(std::string(cpu_capability_name(CpuCapability::kAvx512)) == "avx512");
#if defined(__x86_64__)
  // What the compiler's own CPU check says, independently of the settings' code.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const CpuCapability want = avx512 ? CpuCapability::kAvx512
                             : avx2 ? CpuCapability::kAvx2
                                    : CpuCapability::kDefault;
  CHECK(machine_cpu_capability() == want);
#else
  CHECK(machine_cpu_capability() == CpuCapability::kDefault);
#endif
  WARN("this machine: " << cpu_capability_name(machine_cpu_capability()));
}

TEST_CASE("set_cpu_capability takes levels up to the machine's", "[cpu_settings]") {
  const CpuCapability machine = machine_cpu_capability();
  for (int c = 0; c <= static_cast<int>(machine); ++c) {
    set_cpu_capability(static_cast<CpuCapability>(c));
    CHECK(cpu_capability() == static_cast<CpuCapability>(c));
  }
  if (machine != CpuCapability::kAvx512) {
    const CpuCapability above = static_cast<CpuCapability>(static_cast<int>(machine) + 1);
    CHECK_THROWS_AS(set_cpu_capability(above), ValueError);
    CHECK_THROWS_WITH(set_cpu_capability(above), Contains("above what this CPU supports"));
  }
  CHECK_THROWS_AS(set_cpu_capability(static_cast<CpuCapability>(7)), ValueError);
  CHECK(cpu_capability() == machine);  // the refused calls changed nothing
}

TEST_CASE("thread count: default, set and refused", "[cpu_settings]") {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  const int cpus = CPU_COUNT(&set);
  // `bazel test` runs with OPENBLAS_NUM_THREADS=1 (.bazelrc), which the default follows;
  // tests/kernels/gemm_threads_env_test.sh runs the other cases, no variable at all included.
  const char* blas = std::getenv("OPENBLAS_NUM_THREADS");
  const int want = blas != nullptr && std::atoi(blas) >= 1
                       ? std::atoi(blas)
                       : (cpus < kDefaultMaxThreads ? cpus : kDefaultMaxThreads);
  CHECK(get_num_threads() == want);
  set_num_threads(7);
  CHECK(get_num_threads() == 7);
  set_num_threads(1);
  CHECK(get_num_threads() == 1);
  for (int bad : {0, -1, kMaxThreads + 1}) {
    INFO(bad);
    CHECK_THROWS_AS(set_num_threads(bad), ValueError);
    CHECK_THROWS_WITH(set_num_threads(bad), Contains("set_num_threads: "));
  }
  CHECK(get_num_threads() == 1);
  // Visible from every thread.
  std::thread([] { CHECK(get_num_threads() == 1); }).join();
}

TEST_CASE("thread spin: default, set and refused", "[cpu_settings]") {
  // `bazel test` runs with STREAMGRAD_THREAD_SPIN_US=200 (.bazelrc), which the start follows.
  const char* env = std::getenv("STREAMGRAD_THREAD_SPIN_US");
  CHECK(get_thread_spin_us() == (env != nullptr ? std::atoi(env) : kDefaultSpinUs));
  for (int us : {0, 1, kDefaultSpinUs, kMaxSpinUs}) {
    set_thread_spin_us(us);
    CHECK(get_thread_spin_us() == us);
  }
  set_thread_spin_us(150);
  for (int bad : {-1, kMaxSpinUs + 1}) {
    INFO(bad);
    CHECK_THROWS_AS(set_thread_spin_us(bad), ValueError);
    CHECK_THROWS_WITH(set_thread_spin_us(bad),
                      Contains("set_thread_spin_us: " + std::to_string(bad) + " us"));
  }
  CHECK(get_thread_spin_us() == 150);  // the refused calls changed nothing
  std::thread([] { CHECK(get_thread_spin_us() == 150); }).join();
}

// Run by cpu_settings_spin_env_test.sh, which sets STREAMGRAD_THREAD_SPIN_US (or leaves it
// unset) and EXPECT_SPIN_US: the starting spin, or "error: MESSAGE" for a refused value.
TEST_CASE("the starting spin follows STREAMGRAD_THREAD_SPIN_US", "[.spin_env]") {
  const char* expect = std::getenv("EXPECT_SPIN_US");
  REQUIRE(expect != nullptr);
  const std::string want = expect;
  if (want.rfind("error: ", 0) == 0) {
    CHECK_THROWS_AS(get_thread_spin_us(), ValueError);
    CHECK_THROWS_WITH(get_thread_spin_us(), Contains(want.substr(7)));
  } else {
    CHECK(get_thread_spin_us() == std::atoi(expect));
  }
}

}  // namespace
}  // namespace streamgrad

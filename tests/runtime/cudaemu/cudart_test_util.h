// Helpers of the emulated CUDA runtime's tests (cudart_test.cc, cudart_stream_test.cc):
// a fresh runtime per test under a chosen scheduler, and environment overrides.
//
// Thread-safety: for the test's main thread. Failure: Catch2 assertions.
#ifndef STREAMGRAD_TESTS_RUNTIME_CUDAEMU_CUDART_TEST_UTIL_H_
#define STREAMGRAD_TESTS_RUNTIME_CUDAEMU_CUDART_TEST_UTIL_H_

#include <cuda_runtime.h>
#include <cudaemu_runtime.h>

#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

namespace streamgrad {
namespace cudaemu_test {

inline SimSchedulerOptions deterministic(SimPolicy policy) {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = policy;
  return o;
}

// A runtime with no streams, events, allocations or errors, under `options` (by default
// the adversarial deterministic scheduler, which runs the newest work first).
struct Fresh {
  explicit Fresh(const SimSchedulerOptions& options = deterministic(SimPolicy::kAdversarial)) {
    cudaemu::set_scheduler(options);
    cudaemu::reset_for_testing();
  }
  ~Fresh() {
    cudaemu::reset_for_testing();
    cudaemu::set_scheduler(SimSchedulerOptions{});
  }
};

// Sets an environment variable and re-reads the runtime's configuration; restores both.
struct EnvScope {
  EnvScope(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
    cudaemu::reset_for_testing();
  }
  ~EnvScope() {
    unsetenv(name_);
    cudaemu::reset_for_testing();
  }
  const char* name_;
};

#define CUDA_OK(expr) REQUIRE((expr) == cudaSuccess)

}  // namespace cudaemu_test
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_RUNTIME_CUDAEMU_CUDART_TEST_UTIL_H_

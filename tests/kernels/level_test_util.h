// Helpers for the tests that run the cpu kernels at every instruction-set level and thread
// count (kernels/host/loops.h, kernels/host/parallel.h).
//
// Offers:
//   machine_levels()          every CpuCapability up to the machine's, lowest first.
//   CapabilityScope           sets the level, restores it on exit (ThreadsScope, for the
//                             thread count, is tests/threads_scope.h's).
//   mixed_values<T>(n, seed)  values in [-3, 3) with NaN, infinities, signed zeros,
//                             subnormals and huge values mixed in.
//   same_bits(got, want)      bitwise equality of two vectors (NaN payloads included),
//                             reporting the first differing element.
//   expect_bits_at_every_level<T>(start, want, run)   for each level: a cpu buffer holding
//                             `start`, run(buffer) at that level, and the buffer's bits must
//                             be `want`'s.
//
// Thread-safety: the scopes change process-wide settings; tests using them run alone in
// their process. Failure: Catch2 assertions.
#ifndef STREAMGRAD_TESTS_KERNELS_LEVEL_TEST_UTIL_H_
#define STREAMGRAD_TESTS_KERNELS_LEVEL_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "runtime/runtime.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/threads_scope.h"

namespace streamgrad {
namespace testing {

inline std::vector<CpuCapability> machine_levels() {
  std::vector<CpuCapability> out;
  for (int c = 0; c <= static_cast<int>(machine_cpu_capability()); ++c) {
    out.push_back(static_cast<CpuCapability>(c));
  }
  return out;
}

class CapabilityScope {
 public:
  explicit CapabilityScope(CpuCapability c) : saved_(cpu_capability()) { set_cpu_capability(c); }
  ~CapabilityScope() { set_cpu_capability(saved_); }
  CapabilityScope(const CapabilityScope&) = delete;
  CapabilityScope& operator=(const CapabilityScope&) = delete;

 private:
  CpuCapability saved_;
};

template <typename T>
std::vector<T> mixed_values(size_t n, uint32_t seed) {
  using L = std::numeric_limits<T>;
  const T specials[] = {L::quiet_NaN(), L::infinity(), -L::infinity(), T(0), -T(0),
                        L::denorm_min(), -L::denorm_min(), L::max(), L::lowest(), T(1),
                        T(-1), T(1e-30)};
  std::vector<T> v = random_values<T>(n, -3, 3, seed);
  std::mt19937 gen(seed ^ 0x5bd1e995u);
  for (size_t i = 0; i < n; ++i) {
    if (gen() % 5 == 0) v[i] = specials[gen() % (sizeof(specials) / sizeof(specials[0]))];
  }
  return v;
}

// got: want.size() elements.
template <typename T>
bool same_bits(const T* got, const std::vector<T>& want) {
  // One comparison of the whole buffers first: under the sanitizers a memcmp per element
  // is an intercepted call per element.
  if (want.empty() || std::memcmp(got, want.data(), want.size() * sizeof(T)) == 0) {
    return true;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      INFO("first difference at element " << i << ": got " << +got[i] << ", want " << +want[i]);
      CHECK(false);
      return false;
    }
  }
  return true;
}

template <typename T>
bool same_bits(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  return same_bits(got.data(), want);
}

template <typename T>
void expect_bits_at_every_level(const std::vector<T>& start, const std::vector<T>& want,
                                const std::function<void(const Buffer<T>&)>& run) {
  for (CpuCapability level : machine_levels()) {
    INFO("level " << cpu_capability_name(level));
    CapabilityScope scope(level);
    const Buffer<T> out(Device("cpu"), start);
    run(out);
    // A cpu buffer is host memory: compared where it is (under ThreadSanitizer a copy of
    // every large case cost fresh pages and their shadow).
    if (!same_bits(static_cast<const T*>(out.data()), want)) return;
  }
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_KERNELS_LEVEL_TEST_UTIL_H_

// Helpers of the cuda kernel tests (tests/kernels/cuda): require_cuda_device() (GPU-only
// targets, tests/gpu_required.h) and comparisons in units in the last place.
//
// Thread-safety: test thread only. Failure: Catch2 assertions.
#ifndef STREAMGRAD_TESTS_KERNELS_CUDA_CUDA_TEST_UTIL_H_
#define STREAMGRAD_TESTS_KERNELS_CUDA_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/runtime.h"
#include "tests/gpu_required.h"

namespace streamgrad {
namespace testing {

// Within `ulps` units in the last place of want (bitwise when ulps is 0; NaN matches NaN).
template <typename T>
void check_ulps(const std::vector<T>& got, const std::vector<T>& want, int ulps) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": cuda " << got[i] << ", cpu " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (ulps == 0 || std::isinf(want[i])) {
      CHECK(std::memcmp(&got[i], &want[i], sizeof(T)) == 0);
    } else {
      const T step = std::nextafter(std::fabs(want[i]), std::numeric_limits<T>::infinity()) -
                     std::fabs(want[i]);
      CHECK(std::fabs(got[i] - want[i]) <= ulps * step);
    }
  }
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_KERNELS_CUDA_CUDA_TEST_UTIL_H_

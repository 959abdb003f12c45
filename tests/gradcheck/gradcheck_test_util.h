// Helpers of the gradcheck tests: the engine tests' helpers (engine_test_util.h) and
// gradcheck options that report instead of throwing.
//
// Thread-safety: test thread only. Failure: none of its own.
#ifndef STREAMGRAD_TESTS_GRADCHECK_GRADCHECK_TEST_UTIL_H_
#define STREAMGRAD_TESTS_GRADCHECK_GRADCHECK_TEST_UTIL_H_

#include "gradcheck/gradcheck.h"
#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace testing {

inline GradcheckOptions quiet(bool fast = false) {
  GradcheckOptions o;
  o.raise_exception = false;
  o.fast_mode = fast;
  return o;
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_GRADCHECK_GRADCHECK_TEST_UTIL_H_

// What the tests of the runtime and the kernels include most: Catch2, the standard headers
// they use and the runtime's API. Compiled once per configuration into a precompiled header
// (prelude.bzl); a test names none of it, since -include puts it before the test's own
// first line.
#ifndef STREAMGRAD_TESTS_PCH_RUNTIME_PRELUDE_SRC_H_
#define STREAMGRAD_TESTS_PCH_RUNTIME_PRELUDE_SRC_H_

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

#endif  // STREAMGRAD_TESTS_PCH_RUNTIME_PRELUDE_SRC_H_

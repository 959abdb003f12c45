// What the tests of the operators, the engine, nn and gradcheck include most: Catch2, the
// standard headers they use, the tensor API and the operators. Compiled once per
// configuration into a precompiled header (prelude.bzl); a test names none of it, since
// -include puts it before the test's own first line.
#ifndef STREAMGRAD_TESTS_PCH_OPS_PRELUDE_SRC_H_
#define STREAMGRAD_TESTS_PCH_OPS_PRELUDE_SRC_H_

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

#endif  // STREAMGRAD_TESTS_PCH_OPS_PRELUDE_SRC_H_

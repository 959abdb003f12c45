// math_fns.h's choice of SLEEF flavour.
#include "kernels/functors/math_fns.h"

#include <cstdlib>
#include <cstring>

#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace math {
namespace {

bool choose_flavour() {
  if (const char* v = std::getenv("STREAMGRAD_CPU_MATH"); v != nullptr && *v != '\0') {
    SG_CHECK(std::strcmp(v, "portable") == 0, ValueError,
             "STREAMGRAD_CPU_MATH=", v, ": the only value is \"portable\" (SLEEF's functions "
             "without FMA, the bits a machine without FMA gives); unset it for the machine's "
             "own");
    return false;
  }
#if defined(__x86_64__) || defined(__i386__)
  // The test the avx2 level is chosen by (runtime/backend/cpu_settings.cc), so that a
  // machine that runs the avx2 or avx512 loops has the FMA functions.
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace

bool fma_flavour() {
  static const bool kFma = choose_flavour();
  return kFma;
}

}  // namespace math
}  // namespace kernels
}  // namespace streamgrad

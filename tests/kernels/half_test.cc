// float16 and bfloat16 conversions (runtime/base/half.h): every float16 and bfloat16 bit
// pattern survives a round trip through float; float -> 16 bits rounds to nearest even on
// a table of edge cases (ties, the largest finite values, overflow, subnormals, signed
// zeros, Inf, NaN); and, where the CPU has F16C, both conversions agree with the
// hardware's on a sweep of float bit patterns, at every tie and on every float16 pattern.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "runtime/base/half.h"

namespace streamgrad {
namespace kernels {
namespace {

float from_bits32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST_CASE("every float16 and bfloat16 bit pattern round-trips through float", "[half]") {
  int nans = 0;
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const Half h = Half::from_bits(static_cast<uint16_t>(b));
    const float f = h.to_float();
    if (std::isnan(f)) ++nans;
    REQUIRE(Half::from_float(f).bits == b);
    const BFloat16 bf = BFloat16::from_bits(static_cast<uint16_t>(b));
    REQUIRE(BFloat16::from_float(bf.to_float()).bits == b);
  }
  CHECK(nans == 2 * 1023);  // exponent all ones, mantissa non-zero, either sign
  CHECK(Half::from_bits(0x7bff).to_float() == 65504.0f);
  CHECK(Half::from_bits(0x0001).to_float() == std::ldexp(1.0f, -24));
  CHECK(Half::from_bits(0x03ff).to_float() == std::ldexp(1023.0f, -24));
  CHECK(Half::from_bits(0xfc00).to_float() == -std::numeric_limits<float>::infinity());
  CHECK(BFloat16::from_bits(0x3f80).to_float() == 1.0f);
}

TEST_CASE("float to float16 rounds to nearest even", "[half]") {
  struct Case {
    float in;
    uint16_t want;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {1.0f, 0x3c00},
      {0.1f, 0x2e66},
      {-2.0f, 0xc000},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},      // tie: stays on the even 1.0
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02},  // tie: up to the even neighbour
      {std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f), 0x3c01},  // just above a tie
      {65504.0f, 0x7bff},
      {65519.99f, 0x7bff},  // below the midpoint to 65536
      {65520.0f, 0x7c00},   // the midpoint: ties to even is Inf
      {1e10f, 0x7c00},
      {-1e10f, 0xfc00},
      {std::ldexp(1.0f, -14), 0x0400},  // smallest normal
      {std::ldexp(1.0f, -24), 0x0001},  // smallest subnormal
      {std::ldexp(1.0f, -25), 0x0000},  // half of it: ties to even 0
      {std::nextafter(std::ldexp(1.0f, -25), 1.0f), 0x0001},
      {3 * std::ldexp(1.0f, -25), 0x0002},  // 1.5 units: to even 2
      {std::ldexp(1023.5f, -24), 0x0400},   // the largest subnormal's tie rounds to 2^-14
      {1e-10f, 0x0000},
      {-0.0f, 0x8000},
      {inf, 0x7c00},
      {-inf, 0xfc00},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    CHECK(Half::from_float(c.in).bits == c.want);
  }
  const Half nan = Half::from_float(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(nan.to_float()));
  CHECK((Half::from_float(-std::numeric_limits<float>::quiet_NaN()).bits & 0x8000) != 0);
  // A NaN whose payload lives only in the low bits must stay NaN, not become Inf.
  CHECK(std::isnan(Half::from_float(from_bits32(0x7f800001u)).to_float()));
}

TEST_CASE("float to bfloat16 rounds to nearest even", "[half]") {
  struct Case {
    float in;
    uint16_t want;
  };
  const Case cases[] = {
      {1.0f, 0x3f80},
      {0.1f, 0x3dcd},
      {1.0f + std::ldexp(1.0f, -8), 0x3f80},      // tie: stays even
      {1.0f + 3 * std::ldexp(1.0f, -8), 0x3f82},  // tie: up to even
      {std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f), 0x3f81},
      {std::numeric_limits<float>::max(), 0x7f80},  // rounds past the largest finite
      {from_bits32(0x7f7f7fffu), 0x7f7f},           // just below that tie: largest finite
      {std::numeric_limits<float>::denorm_min(), 0x0000},
      {from_bits32(0x00018000u), 0x0002},  // subnormal tie: 1.5 units to even 2
      {-0.0f, 0x8000},
      {std::numeric_limits<float>::infinity(), 0x7f80},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    CHECK(BFloat16::from_float(c.in).bits == c.want);
  }
  CHECK(std::isnan(BFloat16::from_float(from_bits32(0x7f800001u)).to_float()));
  CHECK(std::isnan(BFloat16::from_float(std::numeric_limits<float>::quiet_NaN()).to_float()));
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hardware_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST_CASE("float to float16 agrees with the CPU's F16C conversion", "[half]") {
  if (!__builtin_cpu_supports("f16c")) {
    WARN("skipped: this CPU has no F16C");
    return;
  }
  int64_t compared = 0;
  // Every 61st bit pattern (all exponents, a spread of mantissas, both signs), and NaNs
  // only for being NaN: the hardware quiets them, we keep their payload. The loop checks
  // with plain comparisons and reports the first difference: a Catch2 assertion per
  // pattern was nearly all of the test's time (70 million of them).
  bool differs = false;
  uint32_t first = 0;
  uint16_t first_ours = 0, first_theirs = 0;
  for (uint64_t u = 0; u <= 0xffffffffull && !differs; u += 61) {
    const float f = from_bits32(static_cast<uint32_t>(u));
    const uint16_t ours = Half::from_float(f).bits, theirs = hardware_half(f);
    const bool ok = std::isnan(f) ? (ours & 0x7c00) == 0x7c00 && (ours & 0x3ff) != 0
                                  : ours == theirs;
    if (!ok) {
      differs = true;
      first = static_cast<uint32_t>(u);
      first_ours = ours;
      first_theirs = theirs;
    }
    if (!std::isnan(f)) ++compared;
  }
  INFO("float bits 0x" << std::hex << first << ": ours 0x" << first_ours << ", F16C 0x"
                       << first_theirs);
  REQUIRE_FALSE(differs);
  CHECK(compared > 70000000);
}

__attribute__((target("f16c"))) float hardware_float(uint16_t h) {
  return _cvtsh_ss(h);
}

// Where rounding decides: for every pair of neighbouring finite float16 values (subnormals
// included) the float halfway between them and the floats on either side of it; and every
// non-NaN float16 pattern widened.
TEST_CASE("float16 conversions agree with F16C at every tie and on every pattern", "[half]") {
  if (!__builtin_cpu_supports("f16c")) {
    WARN("skipped: this CPU has no F16C");
    return;
  }
  bool differs = false;
  uint32_t first = 0;
  for (uint32_t b = 0; b <= 0xffffu && !differs; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = Half::from_bits(h).to_float();
    if (std::isnan(f)) continue;
    uint32_t got, want;
    std::memcpy(&got, &f, sizeof got);
    const float hw = hardware_float(h);
    std::memcpy(&want, &hw, sizeof want);
    if (got != want) {
      differs = true;
      first = b;
      break;
    }
    if ((h & 0x7fffu) >= 0x7bffu) continue;  // no finite neighbour above
    const float next = Half::from_bits(static_cast<uint16_t>(h + 1)).to_float();
    const double tie = (static_cast<double>(f) + static_cast<double>(next)) / 2;
    const float mid = static_cast<float>(tie);  // exact: 12 significant bits
    for (const float x : {std::nextafter(mid, -1e30f), mid, std::nextafter(mid, 1e30f)}) {
      if (Half::from_float(x).bits != hardware_half(x)) {
        differs = true;
        std::memcpy(&first, &x, sizeof first);
      }
    }
  }
  INFO("first difference at 0x" << std::hex << first);
  REQUIRE_FALSE(differs);
}
#endif

}  // namespace
}  // namespace kernels
}  // namespace streamgrad

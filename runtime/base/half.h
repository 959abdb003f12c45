// float16 (IEEE 754 binary16) and bfloat16 storage types and their conversions to and from
// float, as __host__ __device__ functions so that CPU loops and CUDA kernels share them
// (issue 14: the mixed-precision dtypes).
//
//   Half h = Half::from_float(1.0f / 3);   // round to nearest, ties to even
//   float f = h.to_float();                 // exact: every binary16 value is a float
//   BFloat16 b = BFloat16::from_float(x);   // the top 16 bits of x, rounded the same way
//
// Conversions follow IEEE 754: float -> 16 bits rounds to nearest even, overflows to
// +-Inf (float16 beyond 65504 rounded), keeps the sign of zeros and Infs, keeps NaNs NaN
// with their sign and the payload's top bits (the quiet bit set when those are all zero),
// and produces float16 subnormals (down to 2^-24) with correct rounding; 16 bits -> float
// is exact, so every 16-bit pattern survives a round trip through float.
// The functions are always inlined (SG_INLINE): the cpu loops of every instruction-set
// level call them, and an out-of-line copy would be shared between levels (loops.h).
// DTypeOf<Half> and DTypeOf<BFloat16> name their dtypes (item<Half>() reads one).
// Thread-safety: value types. Failure: none (every input has a result).
#ifndef STREAMGRAD_RUNTIME_BASE_HALF_H_
#define STREAMGRAD_RUNTIME_BASE_HALF_H_

#include <cstdint>
#include <cstring>

#include "runtime/base/dtype.h"
#include "runtime/base/host_device.h"

namespace streamgrad {

namespace half_internal {
SG_HOST_DEVICE SG_INLINE uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
SG_HOST_DEVICE SG_INLINE float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
}  // namespace half_internal

struct Half {
  uint16_t bits = 0;

  SG_HOST_DEVICE SG_INLINE static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }

  SG_HOST_DEVICE SG_INLINE static Half from_float(float f) {
    const uint32_t u = half_internal::float_bits(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t mag = u & 0x7fffffffu;
    if (mag >= 0x7f800000u) {  // Inf, or NaN keeping the payload's top bits
      if (mag == 0x7f800000u) return from_bits(static_cast<uint16_t>(sign | 0x7c00u));
      const uint32_t payload = (mag >> 13) & 0x3ffu;
      return from_bits(static_cast<uint16_t>(sign | 0x7c00u | (payload != 0 ? payload : 0x200u)));
    }
    if (mag >= 0x477ff000u) return from_bits(static_cast<uint16_t>(sign | 0x7c00u));  // > 65519.99
    if (mag < 0x38800000u) {  // below 2^-14: a float16 subnormal (or zero)
      if (mag < 0x33000000u) return from_bits(sign);  // below half of 2^-24: rounds to 0
      const uint32_t exp = mag >> 23;
      const uint32_t mant = (mag & 0x7fffffu) | 0x800000u;  // with the implicit bit
      const uint32_t shift = 126u - exp;  // so that the result counts units of 2^-24
      uint32_t q = mant >> shift;
      const uint32_t rest = mant & ((1u << shift) - 1u), half_unit = 1u << (shift - 1u);
      if (rest > half_unit || (rest == half_unit && (q & 1u) != 0)) ++q;
      return from_bits(static_cast<uint16_t>(sign | q));
    }
    // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to even; a
    // carry out of the mantissa correctly bumps the exponent (up to Inf).
    uint32_t v = mag - 0x38000000u;
    v += 0xfffu + ((v >> 13) & 1u);
    return from_bits(static_cast<uint16_t>(sign | (v >> 13)));
  }

  SG_HOST_DEVICE SG_INLINE float to_float() const {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    const uint32_t exp = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu;
    if (exp == 0x1fu) return half_internal::bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) return half_internal::bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float m = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign != 0 ? -m : m;
  }
};

struct BFloat16 {
  uint16_t bits = 0;

  SG_HOST_DEVICE SG_INLINE static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }

  SG_HOST_DEVICE SG_INLINE static BFloat16 from_float(float f) {
    const uint32_t u = half_internal::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: same sign and top payload bits
      const uint16_t top = static_cast<uint16_t>(u >> 16);
      return from_bits((top & 0x7fu) != 0 ? top : static_cast<uint16_t>(top | 0x40u));
    }
    // Round to nearest even on the 16 dropped bits; overflow carries into Inf.
    return from_bits(static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
  }

  SG_HOST_DEVICE SG_INLINE float to_float() const {
    return half_internal::bits_float(static_cast<uint32_t>(bits) << 16);
  }
};

template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::kFloat16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBFloat16;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BASE_HALF_H_

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

  // Without branches, each case computed and the right one selected, so that a loop over
  // many values vectorises (a float16 copy ran one value at a time, and --amp=fp16 trained
  // the ResNet at half bfloat16's speed: bench/RESULTS.md). The results are the file
  // comment's rules, checked against the CPU's own conversion (tests/kernels/half_test).
  SG_HOST_DEVICE SG_INLINE static Half from_float(float f) {
    const uint32_t u = half_internal::float_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t mag = u & 0x7fffffffu;
    // NaN keeps its payload's top bits (made quiet if those are all zero); Inf, and a
    // finite value above 65519.99, become Inf.
    const uint32_t payload = (mag >> 13) & 0x3ffu;
    const uint32_t special =
        0x7c00u | (mag > 0x7f800000u ? (payload != 0 ? payload : 0x200u) : 0u);
    // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to even; a
    // carry out of the mantissa correctly bumps the exponent (up to Inf).
    uint32_t v = mag - 0x38000000u;
    v = (v + 0xfffu + ((v >> 13) & 1u)) >> 13;
    // Below 2^-14, a float16 subnormal or zero: adding 0.5 leaves the value rounded to a
    // multiple of 2^-24 (0.5's unit in the last place), to nearest even, in the low bits.
    const uint32_t sub =
        half_internal::float_bits(half_internal::bits_float(mag) + 0.5f) - 0x3f000000u;
    const uint32_t r = mag >= 0x477ff000u ? special : mag < 0x38800000u ? sub : v;
    return from_bits(static_cast<uint16_t>(sign | r));
  }

  SG_HOST_DEVICE SG_INLINE float to_float() const {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    const uint32_t em = bits & 0x7fffu, exp = em >> 10;
    // Normal, or Inf/NaN (exponent 31 -> 255, the payload kept): the fields shifted into
    // place and the exponent rebiased.
    const uint32_t wide = (em << 13) + (exp == 0x1fu ? 224u << 23 : 112u << 23);
    // Zero or subnormal: mant * 2^-24, exact in float.
    const uint32_t small = half_internal::float_bits(static_cast<float>(static_cast<int32_t>(em)) *
                                                     5.9604644775390625e-8f);
    return half_internal::bits_float(sign | (exp == 0 ? small : wide));
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

// The counter-based generator of uniform and normal (kernels.h) as SG_HOST_DEVICE code:
// the cpu kernels (kernels/random.cc) and the cuda kernels (kernels/cuda) compute
// element i from (seed, offset + i) with these same functions, so a draw does not depend
// on the device, the thread count or out's strides. The uniform bits are integer
// arithmetic and one exact conversion: equal on every device. normal goes through log,
// sqrt and cos, whose device versions may round differently from glibc's in the last
// place.
//
// Thread-safety: pure functions on values. Failure: none (callers check parameters).
#ifndef STREAMGRAD_KERNELS_FUNCTORS_RANDOM_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_RANDOM_OPS_H_

#include <math.h>
#include <stdint.h>

#include <cmath>

#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {

// splitmix64's finaliser: a bijection on 64 bits with full avalanche.
SG_HOST_DEVICE SG_INLINE uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct RandomKey {
  uint64_t a, b;
};

SG_HOST_DEVICE SG_INLINE RandomKey make_random_key(uint64_t seed) {
  return {mix64(seed ^ 0x243F6A8885A308D3ULL), mix64(seed + 0x13198A2E03707344ULL)};
}

// A splitmix64 step at position `counter`, then a second keyed round: without it the
// streams of two seeds would be shifted copies of one sequence.
SG_HOST_DEVICE SG_INLINE uint64_t random_bits(const RandomKey& k, uint64_t counter) {
  return mix64(mix64(k.a + counter * 0x9E3779B97F4A7C15ULL) ^ k.b);
}

// [0, 1) with 53 random bits.
SG_HOST_DEVICE SG_INLINE double random_unit(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// low + (high - low) u, rounded to T and kept below `top` (high stepped back once, since
// rounding to T can land on high; top is high itself when low == high).
template <typename T>
struct UniformGen {
  RandomKey key;
  double low, high;
  T top;
  SG_HOST_DEVICE SG_INLINE T operator()(uint64_t counter) const {
    const T v = static_cast<T>(low + (high - low) * random_unit(random_bits(key, counter)));
    return v < top ? v : top;
  }
};

// Box-Muller keeping only the cosine half, so that each element owns its counter; the
// second uniform comes from the key with its halves swapped.
struct NormalGen {
  RandomKey k1, k2;
  double mean, stddev;
  SG_HOST_DEVICE SG_INLINE double operator()(uint64_t counter) const {
    const double u1 = 1.0 - random_unit(random_bits(k1, counter));  // (0, 1]: log finite
    const double u2 = random_unit(random_bits(k2, counter));
    return mean + stddev * ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586476925286766559 * u2);
  }
};

inline NormalGen make_normal(uint64_t seed, double mean, double stddev) {
  const RandomKey k1 = make_random_key(seed);
  return {k1, {k1.b, k1.a}, mean, stddev};
}

// Host code: the generator of uniform(low, high) for dtype T.
template <typename T>
UniformGen<T> make_uniform(uint64_t seed, double low, double high) {
  const T top = low < high ? std::nextafter(static_cast<T>(high), static_cast<T>(low))
                           : static_cast<T>(high);
  return {make_random_key(seed), low, high, top};
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_RANDOM_OPS_H_

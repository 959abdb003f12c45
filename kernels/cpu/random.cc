// uniform and normal: counter-based, so element i is a pure function of (seed, offset + i)
// and the same on every device, thread count and layout of out.
#include <cmath>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/launch_kernel.h"
#include "kernels/cpu/strided.h"
#include "kernels/kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

constexpr double kTwoPi = 6.283185307179586476925286766559;

// splitmix64's finaliser: a bijection on 64 bits with full avalanche.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct Key {
  uint64_t a, b;
};

Key make_key(uint64_t seed) {
  return {mix64(seed ^ 0x243F6A8885A308D3ULL), mix64(seed + 0x13198A2E03707344ULL)};
}

// A splitmix64 step at position `counter`, then a second keyed round: without it the
// streams of two seeds would be shifted copies of one sequence.
inline uint64_t random_bits(const Key& k, uint64_t counter) {
  return mix64(mix64(k.a + counter * 0x9E3779B97F4A7C15ULL) ^ k.b);
}

// [0, 1) with 53 random bits.
inline double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// Walks out in row-major order and stores gen(counter) at each element.
template <typename T, typename Gen>
void generate(const Layout<1>& l, void* out, uint64_t offset, Gen gen) {
  T* o0 = static_cast<T*>(out);
  uint64_t counter = offset;
  cpu::for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    for (int64_t j = 0; j < n; ++j) o[j * step[0]] = static_cast<T>(gen(counter++));
  });
}

Layout<1> check_random(const char* name, const Stream& stream, const View& out) {
  cpu::check_stream(name, stream);
  cpu::check_output(name, "out", out);
  cpu::check_floating(name, "out", out);
  return cpu::make_layout<1>(out.sizes, {out.strides.data()});
}

}  // namespace

void uniform(const Stream& stream, const View& out, double low, double high, uint64_t seed,
             uint64_t offset) {
  const char* name = "uniform";
  const Layout<1> l = check_random(name, stream, out);
  SG_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, ValueError, name,
           ": expected finite low <= high, got [", low, ", ", high, ")");
  if (l.numel == 0) return;
  void* o = out.data;
  const DType dt = out.dtype;
  cpu::launch_kernel(
      stream, name, {}, {&out},
      [o, dt, low, high, seed, offset](const Layout<1>& l) {
        const Key key = make_key(seed);
        cpu::dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          // Rounding to T can land on `high`; step back below it to keep the interval open.
          const T top = low < high ? std::nextafter(static_cast<T>(high), static_cast<T>(low))
                                   : static_cast<T>(high);
          generate<T>(l, o, offset, [&](uint64_t c) {
            const T v = static_cast<T>(low + (high - low) * unit(random_bits(key, c)));
            return v < top ? v : top;
          });
        });
      },
      l);
}

void normal(const Stream& stream, const View& out, double mean, double stddev, uint64_t seed,
            uint64_t offset) {
  const char* name = "normal";
  const Layout<1> l = check_random(name, stream, out);
  SG_CHECK(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0, ValueError, name,
           ": expected finite mean and std >= 0, got mean ", mean, ", std ", stddev);
  if (l.numel == 0) return;
  void* o = out.data;
  const DType dt = out.dtype;
  cpu::launch_kernel(
      stream, name, {}, {&out},
      [o, dt, mean, stddev, seed, offset](const Layout<1>& l) {
        const Key k1 = make_key(seed);
        const Key k2 = {k1.b, k1.a};  // a second, independent uniform per counter
        cpu::dispatch_floating(dt, [&](auto t) {
          // Box-Muller keeps only the cosine half so that each element owns its counter.
          generate<decltype(t)>(l, o, offset, [&](uint64_t c) {
            const double u1 = 1.0 - unit(random_bits(k1, c));  // (0, 1]: log stays finite
            const double u2 = unit(random_bits(k2, c));
            return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
          });
        });
      },
      l);
}

}  // namespace kernels
}  // namespace streamgrad

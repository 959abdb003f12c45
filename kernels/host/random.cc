// uniform and normal on the host: out walked in row-major order, element i from counter
// offset + i through the generators of kernels/functors/random_ops.h (shared with cuda).
#include "kernels/functors/random_ops.h"
#include "kernels/host/host_kernels.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// Walks out in row-major order and stores gen(counter) at each element.
template <typename T, typename Gen>
void generate(const Layout<1>& l, void* out, uint64_t offset, Gen gen) {
  T* o0 = static_cast<T*>(out);
  uint64_t counter = offset;
  for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    for (int64_t j = 0; j < n; ++j) o[j * step[0]] = static_cast<T>(gen(counter++));
  });
}

}  // namespace

void uniform(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& layout,
             void* o, double low, double high, uint64_t seed, uint64_t offset) {
  dispatch::enqueue(
      stream, spec,
      [o, dt, low, high, seed, offset](const Layout<1>& l) {
        dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          generate<T>(l, o, offset, make_uniform<T>(seed, low, high));
        });
      },
      layout);
}

void normal(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& layout,
            void* o, double mean, double stddev, uint64_t seed, uint64_t offset) {
  dispatch::enqueue(
      stream, spec,
      [o, dt, mean, stddev, seed, offset](const Layout<1>& l) {
        const NormalGen gen = make_normal(seed, mean, stddev);
        dispatch_floating(dt, [&](auto t) { generate<decltype(t)>(l, o, offset, gen); });
      },
      layout);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

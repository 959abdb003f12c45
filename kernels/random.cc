// uniform and normal: counter-based, so element i is a pure function of (seed, offset + i)
// and the same on every device, thread count and layout of out (the generator is
// kernels/functors/random_ops.h, shared with the cuda kernels).
#include <cmath>

#include "kernels/checks.h"
#include "kernels/widen.h"
#include "kernels/launch_kernel.h"
#include "kernels/dispatch/strided.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "kernels/functors/random_ops.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

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
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  cpu::check_output(name, "out", out);
  cpu::check_floating(name, "out", out);
  return cpu::make_layout<1>(out.sizes, {out.strides.data()});
}

}  // namespace

void uniform(const Stream& stream, const View& out, double low, double high, uint64_t seed,
             uint64_t offset) {
  if (cpu::Widen::applies({&out})) {
    cpu::Widen w(stream, "uniform");
    uniform(stream, w.out(out), low, high, seed, offset);
    return w.finish();
  }
  const char* name = "uniform";
  const Layout<1> l = check_random(name, stream, out);
  SG_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, ValueError, name,
           ": expected finite low <= high, got [", low, ", ", high, ")");
  if (l.numel == 0) return;
  void* o = out.data;
  const DType dt = out.dtype;
  cpu::launch_kernel_or_cuda(
      stream, name, {}, {&out},
      [o, dt, low, high, seed, offset](const Layout<1>& l) {
        cpu::dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          generate<T>(l, o, offset, make_uniform<T>(seed, low, high));
        });
      },
      [stream, o, dt, low, high, seed, offset](const Layout<1>& l) {
        cuda::uniform(stream, dt, l, o, low, high, seed, offset);
      },
      l);
}

void normal(const Stream& stream, const View& out, double mean, double stddev, uint64_t seed,
            uint64_t offset) {
  if (cpu::Widen::applies({&out})) {
    cpu::Widen w(stream, "normal");
    normal(stream, w.out(out), mean, stddev, seed, offset);
    return w.finish();
  }
  const char* name = "normal";
  const Layout<1> l = check_random(name, stream, out);
  SG_CHECK(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0, ValueError, name,
           ": expected finite mean and std >= 0, got mean ", mean, ", std ", stddev);
  if (l.numel == 0) return;
  void* o = out.data;
  const DType dt = out.dtype;
  cpu::launch_kernel_or_cuda(
      stream, name, {}, {&out},
      [o, dt, mean, stddev, seed, offset](const Layout<1>& l) {
        const NormalGen gen = make_normal(seed, mean, stddev);
        cpu::dispatch_floating(dt, [&](auto t) { generate<decltype(t)>(l, o, offset, gen); });
      },
      [stream, o, dt, mean, stddev, seed, offset](const Layout<1>& l) {
        cuda::normal(stream, dt, l, o, mean, stddev, seed, offset);
      },
      l);
}

}  // namespace kernels
}  // namespace streamgrad

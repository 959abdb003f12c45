// The element-wise kernels on the host: the loops of the level in use
// (loops_elementwise.cc, the math in kernels/functors/elementwise_ops.h), split over
// threads above kParallelGrain elements, or kMathGrain for transcendental ones.
#include "kernels/functors/elementwise_ops.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/launch_loop.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

void unary(const Stream& stream, const LaunchSpec& spec, Unary op, DType dt,
           const Layout<2>& layout, void* o, const void* x) {
  launch_loop(stream, spec, layout,
              [op, dt, o, x](const Loops& loops, const Layout<2>& l, int64_t b, int64_t e) {
                loops.unary(op, dt, l, o, x, b, e);
              },
              calls_math(op) ? kMathGrain : kParallelGrain);
}

void unary_scalar(const Stream& stream, const LaunchSpec& spec, UnaryScalar op, DType dt,
                  const Layout<2>& layout, void* o, const void* x, double scalar) {
  launch_loop(stream, spec, layout,
              [op, dt, o, x, scalar](const Loops& loops, const Layout<2>& l, int64_t b,
                                     int64_t e) { loops.unary_scalar(op, dt, l, o, x, scalar, b, e); },
              calls_math(op) ? kMathGrain : kParallelGrain);
}

void binary(const Stream& stream, const LaunchSpec& spec, Binary op, DType dt,
            const Layout<3>& layout, void* o, const void* pa, const void* pb) {
  launch_loop(stream, spec, layout,
              [op, dt, o, pa, pb](const Loops& loops, const Layout<3>& l, int64_t begin,
                                  int64_t end) { loops.binary(op, dt, l, o, pa, pb, begin, end); },
              calls_math(op) ? kMathGrain : kParallelGrain);
}

void axpy(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<3>& layout,
          void* o, const void* pa, const void* pb, double alpha) {
  launch_loop(stream, spec, layout,
              [dt, o, pa, pb, alpha](const Loops& loops, const Layout<3>& l, int64_t begin,
                                     int64_t end) { loops.axpy(dt, l, o, pa, pb, alpha, begin, end); });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

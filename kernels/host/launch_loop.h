// Internal to the host implementations: enqueue an element-wise loop of the level in use.
//
//   launch_loop(stream, spec, layout,
//               [=](const Loops& loops, const Layout<3>& l, int64_t b, int64_t e) {
//                 loops.binary(op, dt, l, o, pa, pb, b, e);
//               });
//
// The loop table is the level in use at the launch (loops.h: a sim stream keeps the level
// it was launched with), and the layout's flat range is split over threads above `grain`
// elements (parallel.h): kParallelGrain for memory-bound loops, kMathGrain for loops that
// call a transcendental function per element.
//
// Thread-safety: as launch(). Failure: as launch(); checks belong to the front door.
#ifndef STREAMGRAD_KERNELS_HOST_LAUNCH_LOOP_H_
#define STREAMGRAD_KERNELS_HOST_LAUNCH_LOOP_H_

#include <cstdint>

#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/strided.h"
#include "kernels/host/loops.h"
#include "kernels/host/parallel.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

template <int N, typename Body>
void launch_loop(const Stream& stream, const dispatch::LaunchSpec& spec, const Layout<N>& layout,
                 Body body, int64_t grain = kParallelGrain) {
  const Loops* table = &loops();
  dispatch::enqueue(
      stream, spec,
      [table, body, grain](const Layout<N>& l) {
        parallel_for(0, l.numel, grain,
                     [&](int64_t b, int64_t e) { body(*table, l, b, e); });
      },
      layout);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_LAUNCH_LOOP_H_

// Internal to the cpu kernels: the launch preamble every kernel shares, in one place.
//
//   cpu::launch_kernel(stream, "add", {&a, &b}, {&out}, [=] { ... });
//   cpu::launch_loop(stream, "add", {&a, &b}, {&out}, layout,
//                    [=](const cpu::Loops& loops, const Layout<3>& l, int64_t b, int64_t e) {
//                      loops.binary(op, dt, l, o, pa, pb, b, e);
//                    });
//
// launch_kernel declares the byte range of each view read and written (nullptr entries,
// for optional operands, are skipped) and enqueues `task` through runtime::launch(). On a
// cpu stream launch() runs the work before it returns (runtime/launch.h), so the task is
// passed by reference: no copy of its captures into a std::function and no heap
// allocation per launch. Elsewhere the task (which must capture by value) is moved into
// the stream's queue.
// launch_loop adds what the element-wise kernels share: the loop table of the level in use
// at launch (loops.h) and a parallel split of the layout's flat range above
// kParallelGrain elements (parallel.h).
//
// Thread-safety: as launch(). Failure: as launch(); checks belong to the callers, before.
#ifndef STREAMGRAD_KERNELS_CPU_LAUNCH_KERNEL_H_
#define STREAMGRAD_KERNELS_CPU_LAUNCH_KERNEL_H_

#include <cstddef>
#include <initializer_list>
#include <utility>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/strided.h"
#include "kernels/view.h"
#include "runtime/error.h"
#include "runtime/launch.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

using Views = std::initializer_list<const View*>;

constexpr size_t kMaxLaunchViews = 4;

template <typename Task>
void launch_kernel(const Stream& stream, const char* name, Views reads, Views writes,
                   Task&& task) {
  MemRange r[kMaxLaunchViews], w[kMaxLaunchViews];
  size_t nr = 0, nw = 0;
  SG_INTERNAL_CHECK(reads.size() <= kMaxLaunchViews && writes.size() <= kMaxLaunchViews,
                    name, " declares more than ", kMaxLaunchViews, " views");
  for (const View* v : reads) {
    if (v != nullptr) r[nr++] = v->byte_range();
  }
  for (const View* v : writes) {
    if (v != nullptr) w[nw++] = v->byte_range();
  }
  const LaunchDesc desc{name, {r, nr}, {w, nw}};
  if (stream.device().is_cpu()) {
    launch(stream, desc, [&task] { task(); });
  } else {
    launch(stream, desc, std::forward<Task>(task));
  }
}

// body(loops, layout, begin, end) runs one part of the flat range; it must capture by
// value (see launch_kernel).
template <int N, typename Body>
void launch_loop(const Stream& stream, const char* name, Views reads, Views writes,
                 const Layout<N>& layout, Body body) {
  const Loops* table = &loops();
  launch_kernel(stream, name, reads, writes, [layout, table, body] {
    parallel_for(0, layout.numel, kParallelGrain,
                 [&](int64_t b, int64_t e) { body(*table, layout, b, e); });
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_CPU_LAUNCH_KERNEL_H_

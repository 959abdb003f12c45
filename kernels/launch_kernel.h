// Internal to the cpu kernels: the launch preamble every kernel shares, in one place.
//
//   cpu::launch_kernel(stream, "sum", {&in}, {&out},
//                      [=](const Layout<2>& kept, const Layout<1>& red) { ... }, kept, red);
//   cpu::launch_loop(stream, "add", {&a, &b}, {&out}, layout,
//                    [=](const cpu::Loops& loops, const Layout<3>& l, int64_t b, int64_t e) {
//                      loops.binary(op, dt, l, o, pa, pb, b, e);
//                    });
//
// launch_kernel declares the byte range of each view read and written (nullptr entries,
// for optional operands, are skipped) and enqueues fn(args...) through runtime::launch().
// fn must capture by value; args are the task's large values (layouts, hundreds of bytes).
// On a cpu stream launch() runs the work before it returns (runtime/launch.h), so fn and
// args are used by reference: no copy into a std::function and no heap allocation per
// launch, which was most of a 1-element kernel's cost. Elsewhere both are copied into the
// task that the stream runs later.
// launch_loop adds what the element-wise kernels share: the loop table of the level in use
// at launch (loops.h) and a parallel split of the layout's flat range above
// kParallelGrain elements (parallel.h). The _or_cuda variants hand a cuda stream's launch to
// the kernel's cuda implementation (kernels/cuda/cuda_kernels.h) instead.
//
// Thread-safety: as launch(). Failure: as launch(); checks belong to the callers, before.
#ifndef STREAMGRAD_KERNELS_LAUNCH_KERNEL_H_
#define STREAMGRAD_KERNELS_LAUNCH_KERNEL_H_

#include <cstddef>
#include <initializer_list>
#include <utility>

#include "kernels/host/loops.h"
#include "kernels/host/parallel.h"
#include "kernels/dispatch/strided.h"
#include "kernels/view.h"
#include "runtime/error.h"
#include "runtime/launch.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

using Views = std::initializer_list<const View*>;

constexpr size_t kMaxLaunchViews = 6;  // batch_norm_backward reads five

template <typename Fn, typename... Args>
void launch_kernel(const Stream& stream, const char* name, Views reads, Views writes, Fn fn,
                   const Args&... args) {
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
    launch(stream, desc, [&] { fn(args...); });
  } else {
    launch(stream, desc, [fn, args...] { fn(args...); });
  }
}

template <int N, typename Body>
void launch_loop(const Stream& stream, const char* name, Views reads, Views writes,
                 const Layout<N>& layout, Body body) {
  const Loops* table = &loops();
  launch_kernel(
      stream, name, reads, writes,
      [table, body](const Layout<N>& l) {
        parallel_for(0, l.numel, kParallelGrain,
                     [&](int64_t b, int64_t e) { body(*table, l, b, e); });
      },
      layout);
}

// launch_kernel of on_host(args...) on cpu and sim streams, of on_cuda(args...) on cuda
// streams, where it enqueues the kernel of kernels/cuda/cuda_kernels.h (callers have passed
// check_stream with has_cuda).
template <typename OnHost, typename OnCuda, typename... Args>
void launch_kernel_or_cuda(const Stream& stream, const char* name, Views reads, Views writes,
                           OnHost on_host, OnCuda on_cuda, const Args&... args) {
  if (stream.device().type() == DeviceType::kCuda) {
    launch_kernel(stream, name, reads, writes, on_cuda, args...);
  } else {
    launch_kernel(stream, name, reads, writes, on_host, args...);
  }
}

// launch_loop, or on_cuda(layout) on a cuda stream (as launch_kernel_or_cuda).
template <int N, typename Body, typename OnCuda>
void launch_loop_or_cuda(const Stream& stream, const char* name, Views reads, Views writes,
                         const Layout<N>& layout, Body body, OnCuda on_cuda) {
  if (stream.device().type() == DeviceType::kCuda) {
    launch_kernel(stream, name, reads, writes, on_cuda, layout);
    return;
  }
  launch_loop(stream, name, reads, writes, layout, body);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_LAUNCH_KERNEL_H_

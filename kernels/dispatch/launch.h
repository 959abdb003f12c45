// How a kernel implementation puts its work on a stream.
//
//   LaunchSpec spec("add", {&a, &b}, {&out});       // the front door: name and ranges
//   enqueue(stream, spec, [=](const Layout<3>& l) { ... }, layout);   // an implementation
//   register_impl<KernelId::kBinary>(DeviceType::kCuda, SG_AS_TASK(cuda::binary));
//
// LaunchSpec holds the byte range of each view read and written (nullptr entries, for
// optional operands, are skipped), or refers to the caller's lists of ranges. enqueue() sends fn(args...) through runtime::launch():
// fn must capture by value; args are the task's large values (layouts, hundreds of bytes).
// On a cpu stream launch() runs the work before it returns (runtime/backend/launch.h), so fn and
// args are used by reference: no copy into a std::function and no heap allocation per
// launch, which was most of a 1-element kernel's cost. Elsewhere both are copied into the
// task that the stream runs later.
// SG_AS_TASK(f) turns a function `void f(const Stream&, args...)` that must run as the
// launch's work (the cuda kernels, which enqueue device work from the launching thread)
// into an implementation of the dispatch table's signature.
//
// Thread-safety: as launch(). Failure: as launch(); more than kMaxLaunchViews views is an
// InternalError.
#ifndef STREAMGRAD_KERNELS_DISPATCH_LAUNCH_H_
#define STREAMGRAD_KERNELS_DISPATCH_LAUNCH_H_

#include <cstddef>
#include <initializer_list>
#include <type_traits>

#include "absl/types/span.h"
#include "kernels/view.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace dispatch {

using Views = std::initializer_list<const View*>;

constexpr size_t kMaxLaunchViews = 7;  // attention_backward reads seven

struct LaunchSpec {
  LaunchSpec(const char* launch_name, Views read, Views written) : name(launch_name) {
    SG_INTERNAL_CHECK(read.size() <= kMaxLaunchViews && written.size() <= kMaxLaunchViews,
                      name, " declares more than ", kMaxLaunchViews, " views");
    for (const View* v : read) {
      if (v != nullptr) reads[num_reads++] = v->byte_range();
    }
    for (const View* v : written) {
      if (v != nullptr) writes[num_writes++] = v->byte_range();
    }
  }
  // For calls with more operands than kMaxLaunchViews (the multi-tensor kernels, cat):
  // ranges that the caller owns and keeps alive until the implementation returns.
  LaunchSpec(const char* launch_name, absl::Span<const MemRange> read,
             absl::Span<const MemRange> written)
      : name(launch_name), read_list(read), write_list(written), listed(true) {}
  LaunchDesc desc() const {
    if (listed) return LaunchDesc{name, read_list, write_list};
    return LaunchDesc{name, {reads, num_reads}, {writes, num_writes}};
  }

  const char* name;
  MemRange reads[kMaxLaunchViews];
  MemRange writes[kMaxLaunchViews];
  size_t num_reads = 0, num_writes = 0;
  absl::Span<const MemRange> read_list, write_list;
  bool listed = false;
};

template <typename Fn, typename... Args>
void enqueue(const Stream& stream, const LaunchSpec& spec, Fn fn, const Args&... args) {
  if (stream.device().is_cpu()) {
    launch(stream, spec.desc(), [&] { fn(args...); });
  } else {
    launch(stream, spec.desc(), [fn, args...] { fn(args...); });
  }
}

template <typename Sig, Sig* F>
struct AsTask;
template <typename... A, void (*F)(const Stream&, A...)>
struct AsTask<void(const Stream&, A...), F> {
  static void run(const Stream& stream, const LaunchSpec& spec, A... args) {
    enqueue(
        stream, spec, [stream](const std::decay_t<A>&... a) { F(stream, a...); }, args...);
  }
};

}  // namespace dispatch
}  // namespace kernels
}  // namespace streamgrad

#define SG_AS_TASK(f) (&::streamgrad::kernels::dispatch::AsTask<decltype(f), f>::run)

#endif  // STREAMGRAD_KERNELS_DISPATCH_LAUNCH_H_

// The one entry point through which work reaches a stream.
//
// Every kernel launch, copy and fill names the stream it runs on, the byte ranges it
// reads and the byte ranges it writes. Observers (runtime/backend/observer.h) see each
// launch before it is enqueued; ordering checks hang on the ranges.
//
//   float* y = ...; const float* x = ...;
//   MemRange reads[] = {{x, n * sizeof(float)}};
//   MemRange writes[] = {{y, n * sizeof(float)}};
//   launch(stream, {"relu", reads, writes}, [=] { for (...) y[i] = x[i] > 0 ? x[i] : 0; });
//
// Semantics: on cpu the work runs before launch() returns; on sim it runs later, in
// stream order, on the stream's worker; on cuda `fn` runs at once on the calling thread
// and must only enqueue device work on the stream (runtime/cuda/cuda_stream.h).
// With STREAMGRAD_LAUNCH_BLOCKING=1 (or set_launch_blocking(true)) each launch waits for
// its work, so an error surfaces at the launch that caused it.
//
// Thread-safety: any thread may launch on any stream. Observers are called on the
// launching thread and must be thread-safe.
// Failure: DeviceError for a stream that does not exist; errors of the work itself
// surface at the next synchronisation of the stream (or at once when launch-blocking).
#ifndef STREAMGRAD_RUNTIME_BACKEND_LAUNCH_H_
#define STREAMGRAD_RUNTIME_BACKEND_LAUNCH_H_

#include <cstddef>
#include <functional>
#include <string>

#include <type_traits>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/observer.h"
#include "runtime/backend/stream.h"

namespace streamgrad {

void launch(const Stream& stream, const LaunchDesc& desc, HostFn fn);

namespace detail {
// cpu streams run their work on the launching thread: no HostFn is made (a kernel's
// captures, its strided layout among them, would otherwise be copied to the heap).
void launch_on_host(const Stream& stream, const LaunchDesc& desc, absl::FunctionRef<void()> fn);
}  // namespace detail

// Any callable: the cpu fast path above, a HostFn for every other device.
template <typename Fn, typename = std::enable_if_t<!std::is_same<std::decay_t<Fn>, HostFn>::value>>
void launch(const Stream& stream, const LaunchDesc& desc, Fn&& fn) {
  if (stream.device().is_cpu()) {
    detail::launch_on_host(stream, desc, fn);
  } else {
    launch(stream, desc, HostFn(std::forward<Fn>(fn)));
  }
}
// Byte copy on one stream: each side is memory of that stream's device or host memory.
// Byte fill on one stream: device memory of that stream's device only.
// Cross-device copies: runtime/memory/copy.h.
void copy_async(const Stream& stream, void* dst, const void* src, size_t bytes);
void fill_async(const Stream& stream, void* dst, unsigned char value, size_t bytes);
// Keeps the stream busy for `microseconds` without blocking the host (on cpu, the host
// sleeps: its stream is the host).
void sleep(const Stream& stream, double microseconds);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_LAUNCH_H_

// The one entry point through which work reaches a stream.
//
// Every kernel launch, copy and fill names the stream it runs on, the byte ranges it
// reads and the byte ranges it writes. Observers (the stream sanitizer and the trace
// recorder) see each launch before it is enqueued; ordering checks hang on the ranges.
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
#ifndef STREAMGRAD_RUNTIME_LAUNCH_H_
#define STREAMGRAD_RUNTIME_LAUNCH_H_

#include <cstddef>
#include <functional>
#include <string>

#include <type_traits>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/stream.h"

namespace streamgrad {

struct MemRange {
  const void* ptr;
  size_t bytes;
};

enum class LaunchKind { kKernel, kCopy, kFill, kSleep };

struct LaunchDesc {
  const char* name;
  absl::Span<const MemRange> reads;
  absl::Span<const MemRange> writes;
  LaunchKind kind = LaunchKind::kKernel;
};

// Sees every launch and every ordering operation of the runtime, on the thread that made
// it: the stream sanitizer and the trace recorder are observers. `event` identifies an
// event (its backend object) for as long as it lives.
class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  virtual void on_launch(const Stream& stream, const LaunchDesc& desc) = 0;
  // The backend accepted the launch announced by the latest on_launch of this thread
  // (not called when an observer or the backend threw).
  virtual void on_launch_submitted(const Stream& stream) {}
  virtual void on_event_record(const void* event, const Stream& stream) {}
  virtual void on_event_block(const void* event, const Stream& stream) {}
  // The host learnt that everything before the event's latest record completed
  // (Event::synchronize, or a query() that returned true).
  virtual void on_event_complete(const void* event) {}
  virtual void on_stream_synchronize(const Stream& stream) {}
  virtual void on_device_synchronize(Device device) {}
  // [ptr, ptr + bytes) was just obtained from the device (raw allocation) or returned to
  // it (raw free, which waits for every queued use): nothing can still be using it,
  // whatever used the same addresses before.
  virtual void on_memory_reset(const void* ptr, size_t bytes) {}
  // The caching allocator handed out [ptr, ptr + bytes) for use on `stream` (a new
  // buffer, possibly in memory a freed buffer used before).
  virtual void on_buffer_allocated(const void* ptr, size_t bytes, const Stream& stream) {}
};

// Names what the calling thread is launching for, for observers: the engine opens one per
// backward node it runs, so a sanitizer finding or a trace span says "mul_scalar in
// MulBackward" rather than just "mul_scalar". Scopes nest (the innermost wins) and are
// per thread.
class LaunchScope {
 public:
  explicit LaunchScope(std::string label);
  ~LaunchScope();
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;

 private:
  std::string label_;
  const std::string* previous_;
};
// The innermost LaunchScope's label on this thread, or nullptr.
const std::string* current_launch_scope();

namespace detail {
// Calls fn(observer) for every observer; free when there are none.
bool have_observers();
void notify_observers(const std::function<void(LaunchObserver&)>& fn);
}  // namespace detail

// Observers are not owned; remove one before destroying it.
void add_launch_observer(LaunchObserver* observer);
void remove_launch_observer(LaunchObserver* observer);

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
// Cross-device copies: runtime/copy.h.
void copy_async(const Stream& stream, void* dst, const void* src, size_t bytes);
void fill_async(const Stream& stream, void* dst, unsigned char value, size_t bytes);
// Keeps the stream busy for `microseconds` without blocking the host (on cpu, the host
// sleeps: its stream is the host).
void sleep(const Stream& stream, double microseconds);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_LAUNCH_H_

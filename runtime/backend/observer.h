// The observer interface: what launch() and the rest of the runtime tell the tools that
// watch the streams (the stream sanitizer and the trace recorder in runtime/observe are
// two; a user may add more), and how such a tool plugs in without launch() or a backend
// naming it.
//
//   class Counter : public LaunchObserver {
//     void on_launch(const Stream& s, const LaunchDesc& d) override { ++n; }
//     std::atomic<int> n{0};
//   };
//   Counter c;
//   add_launch_observer(&c);   // ... every launch from here calls c.on_launch ...
//   remove_launch_observer(&c);
//
// Plug-ins: a tool that installs itself from the configuration (STREAMGRAD_TRACE,
// STREAMGRAD_SANITIZE_STREAMS) registers an installer with register_observer_plugin from a
// static initialiser of its own library; the first launch runs every installer once,
// before any work, so linking the tool is what makes it available.
//
// Thread-safety: all functions are thread-safe. Observers are called on the thread that
// launched or synchronised, possibly several at once, and must be thread-safe themselves.
// What an observer itself does from inside a notification (the trace recorder records
// cuda events to time spans) is not reported to the observers.
// Failure: an observer that throws from on_launch stops the launch (the stream sanitizer
// in throw mode does so); the work is then not enqueued and on_launch_end still runs.
#ifndef STREAMGRAD_RUNTIME_BACKEND_OBSERVER_H_
#define STREAMGRAD_RUNTIME_BACKEND_OBSERVER_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/types/span.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/stream.h"

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
  // The launch announced by the latest on_launch of this thread is over, enqueued or not
  // (called on every exit path, after on_launch_submitted when there was one).
  virtual void on_launch_end(const Stream& stream) {}
  // A backend that runs work on host threads (sim) passes each task it enqueues for the
  // launch in progress through this, so that an observer can measure when the work itself
  // ran. Returns the task, wrapped or as it was. Not called for cpu, whose work runs
  // inside launch() (between on_launch and on_launch_submitted).
  virtual HostFn wrap_host_work(const Stream& stream, HostFn fn) { return fn; }
  virtual void on_event_record(const void* event, const Stream& stream) {}
  virtual void on_event_block(const void* event, const Stream& stream) {}
  // The host learnt that everything before the event's latest record completed
  // (Event::synchronize, or a query() that returned true).
  virtual void on_event_complete(const void* event) {}
  virtual void on_stream_synchronize(const Stream& stream) {}
  // The host learnt that `stream` finished every access it made to [ptr, ptr + bytes):
  // a caching allocator saw the stream idle before handing a freed block to another
  // stream. Unlike on_stream_synchronize it orders nothing else, so that whether the
  // program's other accesses are ordered does not depend on when the allocator looked.
  virtual void on_stream_done_with(const Stream& stream, const void* ptr, size_t bytes) {}
  // The same learnt from an event (the allocators' record_stream events): the work before
  // the event's latest record is over, as far as [ptr, ptr + bytes) is concerned.
  virtual void on_event_done_with(const void* event, const void* ptr, size_t bytes) {}
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

// Runs `install` once, at the first launch of the process (at once when a launch already
// happened). For tools that add observers from the configuration; see the top of the file.
// An installer must not launch work (the first launch is waiting for it).
void register_observer_plugin(void (*install)());
// The same from a static initialiser: `const ObserverPlugin kPlugin(install);` at namespace
// scope in the tool's library (alwayslink).
struct ObserverPlugin {
  explicit ObserverPlugin(void (*install)()) { register_observer_plugin(install); }
};

namespace detail {
// Marks, on the calling thread, the backend calls whose event records and waits the
// observers hear of: Event::record / Event::block and the allocator's PendingUses open
// one around theirs. A backend that reports orderings itself (reports_orderings()) reports
// only inside one, so that the events an observer records for its own use (the trace
// recorder's timing) are not reported back to it.
class OrderingReport {
 public:
  OrderingReport();
  ~OrderingReport();
  OrderingReport(const OrderingReport&) = delete;
  OrderingReport& operator=(const OrderingReport&) = delete;

 private:
  bool previous_;
};
bool in_ordering_report();

// Runs the plug-ins' installers, once; launch() calls it before its first work.
void install_observer_plugins();
// Every observer's wrap_host_work, for backends that run work on host threads.
HostFn wrap_host_work(const Stream& stream, HostFn fn);
}  // namespace detail

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_OBSERVER_H_

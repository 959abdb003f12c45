// The trace recorder: a timeline of what every stream ran, as Chrome trace JSON
// (ARCHITECTURE.md §7). Open the file in https://ui.perfetto.dev or chrome://tracing.
//
//   TraceRecorder trace;              // records from here ...
//   ... run work, synchronize ...
//   trace.save("backward.json");      // ... and writes what completed so far
//
// or STREAMGRAD_TRACE=path.json, which starts a process-wide recorder at the first launch
// and writes it at exit. A path that cannot be written is reported on stderr when the
// configuration is read (runtime/backend/config.h), before any work, and nothing is traced.
//
// What is recorded, one lane (pid = device, tid = stream) per stream:
//   - every launch (kernels, copies, fills, sleeps) as a span from when its work started
//     to when it ended on the stream, with the launching thread and enqueue time in args;
//   - every Event::record as a zero-length "record" mark where the stream reached it, and
//     every Event::block as a "wait" mark where the waiting stream was released, joined by
//     a flow arrow record -> wait;
//   - host synchronisations (stream, event, device) as marks on the host lane of the
//     thread that waited.
// Times are microseconds since the recorder started, rounded to the nanosecond. On cpu
// and sim a span is measured around the work itself (the wrapper adds no stream task, so
// deterministic schedules are unchanged); on cuda a pair of timing events brackets the
// launch and save() first synchronises each cuda device it saw. A mark's time is
// derived: a record is reached when the stream finished the work enqueued before it, a
// wait is released when both its stream and the record were reached.
//
// Thread-safety: all methods are thread-safe; several recorders may run at once.
// Failure: save() throws Error when the file cannot be written. Spans whose work has not
// run yet are left out of the JSON and counted in otherData.incomplete_spans. Names that
// are not valid UTF-8 are written with U+FFFD in place of the bad bytes.
#ifndef STREAMGRAD_RUNTIME_OBSERVE_TRACE_H_
#define STREAMGRAD_RUNTIME_OBSERVE_TRACE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/backend/launch.h"

namespace streamgrad {

namespace trace_internal {
struct TraceState;
}

class TraceRecorder final : public LaunchObserver {
 public:
  // Registers itself as a launch observer; recording starts at once.
  TraceRecorder();
  ~TraceRecorder() override;
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Stops recording (idempotent); save() still writes what was recorded.
  void stop();
  std::string chrome_json() const;
  void save(const std::string& path) const;
  // Launches recorded so far, finished or not.
  size_t span_count() const;

  void on_launch(const Stream& stream, const LaunchDesc& desc) override;
  void on_launch_submitted(const Stream& stream) override;
  void on_launch_end(const Stream& stream) override;
  HostFn wrap_host_work(const Stream& stream, HostFn fn) override;
  void on_event_record(const void* event, const Stream& stream) override;
  void on_event_block(const void* event, const Stream& stream) override;
  void on_event_complete(const void* event) override;
  // An allocator's record_stream event: shown as any completion is.
  void on_event_done_with(const void* event, const void*, size_t) override {
    on_event_complete(event);
  }
  void on_stream_synchronize(const Stream& stream) override;
  void on_device_synchronize(Device device) override;

 private:
  // Shared with the wrappers of work still queued on streams, which may outlive `this`.
  std::shared_ptr<trace_internal::TraceState> state_;
};

// The process-wide recorder of STREAMGRAD_TRACE (null when unset). Started by the first
// launch (this library registers it as an observer plug-in, runtime/backend/observer.h);
// written to the path at exit, or now by write_global_trace().
TraceRecorder* global_trace();
// Writes the process-wide trace now (no-op when STREAMGRAD_TRACE is unset).
void write_global_trace();

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_OBSERVE_TRACE_H_

// Event: a marker in a stream's work, for device-side ordering and host polling.
//
// Offers Event (move-only) with record(stream), block(stream), query(), synchronize() and
// elapsed_ms(end) when created with timing. Semantics follow CUDA events:
//   - an event never recorded is complete: query() is true, block() and synchronize() are
//     no-ops;
//   - block(s) makes stream s wait for the most recent record() at the time of the call;
//   - the event belongs to the device of its first record(); recording it on a stream of
//     another device throws DeviceError.
// Memory ordering: after synchronize() returns (or query() returns true), the calling
// thread sees every effect of the work enqueued before the latest record().
// Thread-safety: not thread-safe; one thread at a time may use an Event (as in libtorch).
// Failure: DeviceError for device mismatches; Error for elapsed_ms on events without
// timing, not recorded, or not yet complete.
#ifndef STREAMGRAD_RUNTIME_EVENT_H_
#define STREAMGRAD_RUNTIME_EVENT_H_

#include <memory>
#include <optional>

#include "runtime/backend.h"
#include "runtime/stream.h"

namespace streamgrad {

class Event {
 public:
  explicit Event(bool enable_timing = false) : timing_(enable_timing) {}
  Event(Event&&) noexcept = default;
  Event& operator=(Event&&) noexcept = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() = default;

  void record(const Stream& stream);
  // Records on the current stream of `device`.
  void record(Device device);
  void block(const Stream& stream) const;
  bool query() const;
  void synchronize() const;
  // Milliseconds from this event's completion to `end`'s; both need timing and must have
  // completed.
  double elapsed_ms(const Event& end) const;

  bool was_recorded() const { return impl_ != nullptr; }
  bool timing() const { return timing_; }
  // The device of the first record, if any.
  std::optional<Device> device() const { return device_; }

 private:
  bool timing_;
  std::optional<Device> device_;
  std::unique_ptr<BackendEvent> impl_;
};

// How many Event::record calls the process has made: lets tests check that the engine
// records no event where producer and consumer share a stream.
uint64_t events_recorded();

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_EVENT_H_

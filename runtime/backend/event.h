// Event: a marker in a stream's work, for device-side ordering and host polling.
//
// Offers Event (move-only) with record(stream), block(stream), query(), synchronize() and
// elapsed_ms(end) when created with timing, and the process-wide counters
// events_recorded(), stream_waits_issued() and backend_events_created(). Semantics follow
// CUDA events:
//   - an event never recorded is complete: query() is true, block() and synchronize() are
//     no-ops;
//   - block(s) makes stream s wait for the most recent record() at the time of the call;
//   - the event belongs to the device of its first record(); recording it on a stream of
//     another device throws DeviceError.
// Pooling: the backend object behind an Event is taken from a per-device pool at its first
// record() and given back when the Event is destroyed or assigned over, so a backward
// that records many short-lived events allocates (on cuda: cudaEventCreate) only until
// the pool is warm. Each thread keeps a few free objects of its own in front of the
// shared, locked pool. A pooled object's earlier records are never observed: the Event that
// takes it counts as never recorded until its own record() overwrites them.
// Memory ordering: after synchronize() returns (or query() returns true), the calling
// thread sees every effect of the work enqueued before the latest record().
// Thread-safety: not thread-safe; one thread at a time may use an Event (as in libtorch).
// Different Events may be used, created and destroyed concurrently, on any threads.
// Failure: DeviceError for device mismatches; Error for elapsed_ms on events without
// timing, not recorded, or not yet complete.
#ifndef STREAMGRAD_RUNTIME_BACKEND_EVENT_H_
#define STREAMGRAD_RUNTIME_BACKEND_EVENT_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "runtime/backend/backend.h"
#include "runtime/backend/stream.h"

namespace streamgrad {

namespace detail {
// Gives a backend event back to its device's pool (or deletes it when the pool is full).
struct PooledEventDeleter {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool timing = false;
  void operator()(BackendEvent* event) const noexcept;
};
}  // namespace detail

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
  std::unique_ptr<BackendEvent, detail::PooledEventDeleter> impl_;
};

// How many Event::record calls the process has made: lets tests check that the engine
// records no event where producer and consumer share a stream.
uint64_t events_recorded();
// How many device-side waits Event::block (and so Stream::wait_stream) has issued: blocks
// on an event never recorded or recorded on cpu, and waits of the cpu stream (host
// waits), issue none. With events_recorded(), the synchronisation a backward costs.
uint64_t stream_waits_issued();
// How many backend event objects Events have created (on cuda, cudaEventCreate calls);
// the rest of their records reused pooled objects.
uint64_t backend_events_created();

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_EVENT_H_

// Stream: a value naming one in-order work queue of a device, and the per-thread
// "current stream" of every device.
//
// Offers:
//   Stream::create(device, priority)    a new stream (cpu: its single stream).
//   Stream::from_pool(device)           one of a per-device pool of 32 streams, round-robin.
//   Stream::default_for(device)         id 0, the device's default stream.
//   current_stream(device) / set_current_stream(stream)   per thread, per device.
//   stream.wait_stream(other)           `stream` waits (device-side) for work already
//                                       enqueued on `other`; the host is not blocked.
//   stream.synchronize() / query()      host waits for / polls the stream's work.
//
// Streams of the sim and cuda devices are independent: work on two streams has no order
// unless an event, wait_stream or host synchronisation imposes one (CUDA's non-blocking
// stream model; the default stream is no exception). See Note [Backward stream semantics].
//
// Memory ordering: when synchronize() returns, every effect of the work enqueued on the
// stream before the call is visible to the calling thread. When work on stream B runs
// after B.wait_stream(A), it sees every effect of the work enqueued on A before the call.
//
// Thread-safety: Stream is an immutable value, safe to copy and pass between threads;
// its operations may be called concurrently. The current stream is per thread.
// Failure: a stream whose device does not exist, or an id the device never created,
// throws DeviceError. Errors raised by earlier asynchronous work surface at synchronize().
#ifndef STREAMGRAD_RUNTIME_BACKEND_STREAM_H_
#define STREAMGRAD_RUNTIME_BACKEND_STREAM_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "runtime/base/device.h"

namespace streamgrad {

using StreamId = int32_t;

class Event;

class Stream {
 public:
  // Default stream of a device (index -1 resolves to the current device).
  explicit Stream(Device device) : Stream(default_for(device)) {}

  static Stream create(Device device, int priority = 0);
  static Stream from_pool(Device device);
  static Stream default_for(Device device);
  // A stream from raw parts, e.g. parsed back from a trace; validated on first use.
  static Stream unchecked(Device device, StreamId id) { return Stream(device, id); }

  Device device() const { return device_; }
  StreamId id() const { return id_; }
  bool is_default() const { return id_ == 0; }
  int priority() const;
  std::string str() const;  // "sim:0/s3"

  bool query() const;
  void synchronize() const;
  void wait_stream(const Stream& other) const;
  void wait_event(const Event& event) const;

  bool operator==(const Stream& o) const { return device_ == o.device_ && id_ == o.id_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }
  bool operator<(const Stream& o) const {
    return device_ != o.device_ ? device_ < o.device_ : id_ < o.id_;
  }

 private:
  Stream(Device device, StreamId id) : device_(device), id_(id) {}
  Device device_;
  StreamId id_;
};

std::ostream& operator<<(std::ostream& os, const Stream& s);

// The calling thread's current stream on `device` (index -1: the current device of that
// type). Defaults to the device's default stream.
Stream current_stream(Device device);
// Makes `stream` current on its device for the calling thread; does not change the
// current device (StreamGuard does both, scoped).
void set_current_stream(const Stream& stream);

}  // namespace streamgrad

template <>
struct std::hash<streamgrad::Stream> {
  size_t operator()(const streamgrad::Stream& s) const {
    return std::hash<streamgrad::Device>()(s.device()) * 131 + static_cast<size_t>(s.id());
  }
};

#endif  // STREAMGRAD_RUNTIME_BACKEND_STREAM_H_

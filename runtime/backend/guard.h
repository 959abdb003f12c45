// DeviceGuard and StreamGuard: scoped changes of the thread's current device and stream.
//
//   {
//     DeviceGuard g("sim:1");          // current_device() is sim:1 in this scope
//     StreamGuard s(side_stream);      // side_stream current on its device, and that
//                                      // device current, in this scope
//   }                                  // both restored, also when unwinding
//
// DeviceGuard::set_stream(s) makes s current on the guarded device for the guard's scope;
// a stream of another device is refused (use a StreamGuard for that).
// OptionalDeviceGuard(std::optional<Device>) is a DeviceGuard when given a device and
// does nothing when given none, for code whose device is optional (as libtorch's
// OptionalDeviceGuard).
// Guards can be neither copied nor moved. Destructors never throw.
// Thread-safety: guards change per-thread state; use each on the thread that made it.
// Failure: constructors throw DeviceError for devices that do not exist, leaving the
// thread's state unchanged.
#ifndef STREAMGRAD_RUNTIME_BACKEND_GUARD_H_
#define STREAMGRAD_RUNTIME_BACKEND_GUARD_H_

#include <optional>

#include "runtime/backend/stream.h"
#include "runtime/base/device.h"

namespace streamgrad {

class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  Device device() const { return device_; }
  Device original_device() const { return original_; }
  void set_stream(const Stream& stream);

 private:
  Device device_;
  Device original_;
  int original_type_index_;
  std::optional<Stream> original_stream_;
};

class OptionalDeviceGuard {
 public:
  explicit OptionalDeviceGuard(std::optional<Device> device);
  OptionalDeviceGuard(const OptionalDeviceGuard&) = delete;
  OptionalDeviceGuard& operator=(const OptionalDeviceGuard&) = delete;

  // The guarded device and the one current before it; empty when no device was given.
  std::optional<Device> device() const;
  std::optional<Device> original_device() const;

 private:
  std::optional<DeviceGuard> guard_;
};

class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

  Stream stream() const { return stream_; }
  Stream original_stream() const { return original_stream_; }

 private:
  DeviceGuard device_guard_;
  Stream stream_;
  Stream original_stream_;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_GUARD_H_

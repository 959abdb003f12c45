#include "runtime/backend/guard.h"

#include "absl/strings/str_cat.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"

namespace streamgrad {

DeviceGuard::DeviceGuard(Device device)
    : device_(resolve_device(device, "DeviceGuard")),
      original_(current_device()),
      original_type_index_(current_device_index(device_.type())) {
  set_current_device(device_);
}

DeviceGuard::~DeviceGuard() {
  try {
    if (original_stream_.has_value()) set_current_stream(*original_stream_);
    // Restore the per-type index first, then the overall current device.
    if (!device_.is_cpu()) set_current_device(Device(device_.type(), original_type_index_));
    set_current_device(original_);
  } catch (...) {
    // Restoring a device that existed when the guard was made cannot fail; a destructor
    // must not throw while unwinding.
  }
}

void DeviceGuard::set_stream(const Stream& stream) {
  const Device d = resolve_device(stream.device(), "DeviceGuard::set_stream");
  if (d != device_) {
    throw DeviceError(absl::StrCat("DeviceGuard::set_stream: stream ", stream.str(),
                                   " belongs to ", d.str(), ", not to the guarded device ",
                                   device_.str(),
                                   "; use StreamGuard(stream) to switch device and stream"));
  }
  if (!original_stream_.has_value()) original_stream_ = current_stream(device_);
  set_current_stream(stream);
}

OptionalDeviceGuard::OptionalDeviceGuard(std::optional<Device> device) {
  if (device.has_value()) guard_.emplace(*device);
}

std::optional<Device> OptionalDeviceGuard::device() const {
  if (!guard_.has_value()) return std::nullopt;
  return guard_->device();
}

std::optional<Device> OptionalDeviceGuard::original_device() const {
  if (!guard_.has_value()) return std::nullopt;
  return guard_->original_device();
}

StreamGuard::StreamGuard(const Stream& stream)
    : device_guard_(stream.device()),
      stream_(Stream::unchecked(device_guard_.device(), stream.id())),
      original_stream_(current_stream(device_guard_.device())) {
  set_current_stream(stream_);  // validates the id; the device guard undoes itself on throw
}

StreamGuard::~StreamGuard() {
  try {
    set_current_stream(original_stream_);
  } catch (...) {
  }
}

}  // namespace streamgrad

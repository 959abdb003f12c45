// Device: a value naming one device (type and index), e.g. "cpu", "sim:1", "cuda:0".
//
// Offers DeviceType, Device (parse / print / compare / hash) and device_type_name().
// An index of -1 means "the current device of that type" ("cuda", "sim"); resolve it with
// resolve_device() (devices.h). "cpu" always has index 0.
// Thread-safety: plain values. Failure: Device::parse and the constructor throw ValueError
// on malformed input; whether the device exists is checked where it is used.
#ifndef STREAMGRAD_RUNTIME_BASE_DEVICE_H_
#define STREAMGRAD_RUNTIME_BASE_DEVICE_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "absl/strings/string_view.h"

namespace streamgrad {

enum class DeviceType : int8_t { kCpu = 0, kSim = 1, kCuda = 2 };
inline constexpr int kNumDeviceTypes = 3;
// Upper bound on devices of one type; it sizes the per-thread current-stream tables.
inline constexpr int kMaxDevicesPerType = 64;

const char* device_type_name(DeviceType type);

class Device {
 public:
  // Device(kCpu) is cpu:0; Device(kSim) means the current sim device (index -1).
  explicit Device(DeviceType type, int index = -1);
  // Implicit from a string so that APIs read naturally: to("sim:1").
  Device(const char* spec) : Device(parse(spec)) {}  // NOLINT(runtime/explicit)
  Device(const std::string& spec) : Device(parse(spec)) {}  // NOLINT(runtime/explicit)

  // Accepts "cpu", "cpu:0", "sim", "sim:N", "cuda", "cuda:N".
  static Device parse(absl::string_view spec);

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool has_index() const { return index_ >= 0; }
  bool is_cpu() const { return type_ == DeviceType::kCpu; }
  std::string str() const;

  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool operator<(const Device& o) const {
    return type_ != o.type_ ? type_ < o.type_ : index_ < o.index_;
  }

 private:
  DeviceType type_;
  int index_;
};

std::ostream& operator<<(std::ostream& os, const Device& d);
std::ostream& operator<<(std::ostream& os, DeviceType t);

}  // namespace streamgrad

template <>
struct std::hash<streamgrad::Device> {
  size_t operator()(const streamgrad::Device& d) const {
    return (static_cast<size_t>(d.type()) << 16) ^ static_cast<size_t>(d.index() + 1);
  }
};

#endif  // STREAMGRAD_RUNTIME_BASE_DEVICE_H_

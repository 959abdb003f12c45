#include "runtime/base/device.h"

#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

namespace streamgrad {

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kSim:
      return "sim";
    case DeviceType::kCuda:
      return "cuda";
  }
  return "unknown";
}

Device::Device(DeviceType type, int index) : type_(type), index_(index) {
  SG_CHECK(index >= -1 && index < kMaxDevicesPerType, ValueError, "Device(",
           device_type_name(type), ", ", index, "): index must be in [0, ",
           kMaxDevicesPerType, ") or -1 for the current device");
  if (type == DeviceType::kCpu) {
    SG_CHECK(index <= 0, ValueError, "Device(cpu, ", index,
             "): there is one cpu device; use \"cpu\" or \"cpu:0\"");
    index_ = 0;
  }
}

Device Device::parse(absl::string_view spec) {
  const auto bad = [&](absl::string_view why) {
    return ValueError(absl::StrCat("invalid device string \"", spec, "\": ", why,
                                   "; expected \"cpu\", \"sim[:N]\" or \"cuda[:N]\" with N >= 0"));
  };
  absl::string_view name = spec;
  absl::string_view number;
  const size_t colon = spec.find(':');
  if (colon != absl::string_view::npos) {
    name = spec.substr(0, colon);
    number = spec.substr(colon + 1);
    if (number.empty()) throw bad("missing index after ':'");
  }
  DeviceType type;
  if (name == "cpu") {
    type = DeviceType::kCpu;
  } else if (name == "sim") {
    type = DeviceType::kSim;
  } else if (name == "cuda") {
    type = DeviceType::kCuda;
  } else {
    throw bad(absl::StrCat("unknown device type \"", name, "\""));
  }
  if (colon == absl::string_view::npos) return Device(type, type == DeviceType::kCpu ? 0 : -1);
  for (char c : number) {
    if (!std::isdigit(static_cast<unsigned char>(c))) throw bad("the index is not a number");
  }
  int index = 0;
  if (!absl::SimpleAtoi(number, &index) || index >= kMaxDevicesPerType) {
    throw bad(absl::StrCat("the index is out of range [0, ", kMaxDevicesPerType, ")"));
  }
  if (type == DeviceType::kCpu && index != 0) throw bad("there is one cpu device, cpu:0");
  return Device(type, index);
}

std::string Device::str() const {
  if (type_ == DeviceType::kCpu) return "cpu";
  if (index_ < 0) return device_type_name(type_);
  return absl::StrCat(device_type_name(type_), ":", index_);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }
std::ostream& operator<<(std::ostream& os, DeviceType t) { return os << device_type_name(t); }

}  // namespace streamgrad

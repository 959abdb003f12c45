#include "runtime/backend/devices.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

struct ThreadDevices {
  Device current{DeviceType::kCpu, 0};
  std::array<int, kNumDeviceTypes> index{};  // per type, 0 by default
};

ThreadDevices& thread_devices() {
  thread_local ThreadDevices state;
  return state;
}

}  // namespace

int device_count(DeviceType type) noexcept {
  if (type == DeviceType::kCpu) return 1;
  try {
    Backend* b = find_backend(type);
    return b == nullptr ? 0 : b->device_count();
  } catch (...) {
    return 0;  // A backend that cannot even start has no devices.
  }
}

bool is_available(DeviceType type) noexcept { return device_count(type) > 0; }

Device try_device(DeviceType type, int index) {
  if (index >= 0 && index < device_count(type)) return Device(type, index);
  return Device(DeviceType::kCpu, 0);
}

std::vector<Device> all_devices(DeviceType type) {
  std::vector<Device> out;
  const int n = device_count(type);
  for (int i = 0; i < n; ++i) out.emplace_back(type, i);
  if (out.empty()) out.emplace_back(DeviceType::kCpu, 0);
  return out;
}

Device default_device() {
  if (is_available(DeviceType::kCuda)) return Device(DeviceType::kCuda, 0);
  if (is_available(DeviceType::kSim)) return Device(DeviceType::kSim, 0);
  return Device(DeviceType::kCpu, 0);
}

Device current_device() { return thread_devices().current; }

int current_device_index(DeviceType type) {
  return thread_devices().index[static_cast<int>(type)];
}

std::string cuda_unavailable_reason() {
  Backend* cuda = find_backend(DeviceType::kCuda);
  if (cuda == nullptr) {
    return "this program has no cuda backend: it links the lean library (//:streamgrad_lean), "
           "or the full one (//:streamgrad) was built where nvcc was missing";
  }
  if (cuda->device_count() > 0) return "";
  for (const auto& fact : cuda->backend_facts()) {
    if (fact.first == "no devices because") return "no usable GPU: " + fact.second;
  }
  return "no usable GPU or driver was found (CUDA_VISIBLE_DEVICES may mask them)";
}

Device resolve_device(Device device, const char* op) {
  if (device.is_cpu()) return device;
  const int index = device.has_index() ? device.index() : current_device_index(device.type());
  const int count = device_count(device.type());
  if (index < count) return Device(device.type(), index);
  std::string hint;
  switch (device.type()) {
    case DeviceType::kSim:
      hint = "the number of sim devices is set by STREAMGRAD_SIM_DEVICES (default 2) and "
             "masked by STREAMGRAD_VISIBLE_DEVICES";
      break;
    case DeviceType::kCuda:
      hint = count == 0 ? cuda_unavailable_reason() : "CUDA_VISIBLE_DEVICES may mask some GPUs";
      break;
    default:
      break;
  }
  throw DeviceError(absl::StrCat(op, ": device ", device_type_name(device.type()), ":", index,
                                 " does not exist; there ",
                                 count == 1 ? "is 1 " : absl::StrCat("are ", count, " "),
                                 device_type_name(device.type()), " device",
                                 count == 1 ? "" : "s", " (", hint,
                                 "); use try_device() or all_devices() to pick one that exists"));
}

void set_current_device(Device device) {
  const Device d = resolve_device(device, "set_current_device");
  ThreadDevices& state = thread_devices();
  state.current = d;
  if (!d.is_cpu()) {
    state.index[static_cast<int>(d.type())] = d.index();
    backend(d.type()).on_set_device(d.index());
  }
}

void synchronize(Device device) {
  const Device d = resolve_device(device, "synchronize");
  if (d.is_cpu()) return;
  backend(d.type()).synchronize_device(d.index());
  detail::notify_observers([&](LaunchObserver& o) { o.on_device_synchronize(d); });
}

}  // namespace streamgrad

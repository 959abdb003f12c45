// Helpers shared by the runtime tests: the devices present in this build and process.
#ifndef STREAMGRAD_TESTS_RUNTIME_TEST_DEVICES_H_
#define STREAMGRAD_TESTS_RUNTIME_TEST_DEVICES_H_

#include <cstring>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace testing {

// cpu, every sim device and every cuda device present.
inline std::vector<Device> present_devices() {
  std::vector<Device> out{Device("cpu")};
  for (DeviceType t : {DeviceType::kSim, DeviceType::kCuda}) {
    for (int i = 0; i < device_count(t); ++i) out.emplace_back(t, i);
  }
  return out;
}

// Blocking read of device memory, ordered on `stream`.
template <typename T>
T read_value(const void* ptr, const Stream& stream) {
  StreamGuard g(stream);
  T out{};
  copy_bytes(&out, Device("cpu"), ptr, stream.device(), sizeof(T));
  return out;
}

// Blocking write to device memory, ordered on `stream`.
template <typename T>
void write_value(void* ptr, T value, const Stream& stream) {
  StreamGuard g(stream);
  copy_bytes(ptr, stream.device(), &value, Device("cpu"), sizeof(T));
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_RUNTIME_TEST_DEVICES_H_

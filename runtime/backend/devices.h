// Which devices exist, which one is current, and the helpers device-agnostic code uses.
//
// Offers:
//   device_count(type), is_available(type)     never throw; 0 / false when absent.
//   try_device(type, i)     that device if present, else cpu.
//   all_devices(type)       every present device of that type, else {cpu}.
//   default_device()        cuda:0 if present, else sim:0, else cpu (tools share it).
//   current_device()        the thread's current device (cpu until a guard or
//                           set_current_device says otherwise); memory and tensors made
//                           without naming a device land there.
//   current_device_index(type)  the thread's current index of that type (0 by default);
//                           it resolves "sim" / "cuda" without an index.
//   set_current_device(d)   unscoped; DeviceGuard is the scoped form.
//   resolve_device(d, op)   fills in a missing index and checks the device exists,
//                           throwing DeviceError that names `op` otherwise.
//   synchronize(device)     host waits for all work on every stream of the device.
//   cuda_unavailable_reason()  why there is no cuda device ("this build has no CUDA
//                           support...", "no usable GPU: cudaGetDeviceCount: ..."), or ""
//                           when there is one; for messages.
//
// Thread-safety: the current device is per thread; everything else is safe from any
// thread. Failure: DeviceError naming the device, how many exist, and the variable that
// configures them.
#ifndef STREAMGRAD_RUNTIME_BACKEND_DEVICES_H_
#define STREAMGRAD_RUNTIME_BACKEND_DEVICES_H_

#include <string>
#include <vector>

#include "runtime/base/device.h"

namespace streamgrad {

int device_count(DeviceType type) noexcept;
bool is_available(DeviceType type) noexcept;
Device try_device(DeviceType type, int index = 0);
std::vector<Device> all_devices(DeviceType type);
Device default_device();

Device current_device();
int current_device_index(DeviceType type);
void set_current_device(Device device);
Device resolve_device(Device device, const char* op);
void synchronize(Device device);
std::string cuda_unavailable_reason();

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_DEVICES_H_

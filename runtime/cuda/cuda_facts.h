// What tools/devices shows about CUDA (Backend::backend_facts / device_facts of the cuda
// backend): the runtime's version, the driver's release and the CUDA version it supports,
// why there are no devices when there are none, and per GPU what users otherwise read
// from nvidia-smi (compute capability, multiprocessors, memory bus, L2, PCI bus id).
//
// Thread-safety: any thread. Failure: never throws; an unreadable fact says so.
#ifndef STREAMGRAD_RUNTIME_CUDA_CUDA_FACTS_H_
#define STREAMGRAD_RUNTIME_CUDA_CUDA_FACTS_H_

#include <cuda_runtime_api.h>

#include <string>

#include "runtime/backend/backend.h"

namespace streamgrad {

// `count` and `count_error` are what cudaGetDeviceCount gave the backend.
Facts cuda_backend_facts(int count, cudaError_t count_error);
Facts cuda_device_facts(int index);

// The release ("580.159.04", as nvidia-smi's "Driver Version") in the first line of
// /proc/driver/nvidia/version, of the proprietary or the open kernel module; "unknown"
// where the line names none.
std::string nvidia_driver_release(const std::string& version_line);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDA_CUDA_FACTS_H_

// CUDA error codes as streamgrad exceptions: check_cuda (runtime/cuda/cuda_stream.h) and
// the backend's check (runtime/cuda/cuda_backend.h), each message ending with what to do
// about that error.
#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_stream.h"

#if defined(STREAMGRAD_CUDA_EMULATED)
#include "cudaemu_runtime.h"
#endif

namespace streamgrad {
namespace {

// What to do about `err`, appended to every message.
const char* hint_for(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
      return "no usable NVIDIA driver or GPU; check nvidia-smi and CUDA_VISIBLE_DEVICES, "
             "or fall back to sim or cpu with try_device()";
    case cudaErrorInvalidDevice:
      return "the device index is out of range (CUDA_VISIBLE_DEVICES masks GPUs); pick "
             "devices with all_devices(DeviceType::kCuda)";
    case cudaErrorMemoryAllocation:
      return "the allocation does not fit; free tensors, call empty_cache(), or use "
             "smaller batches";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return "an earlier kernel failed and the CUDA context is unusable; restart the "
             "process and rerun with STREAMGRAD_LAUNCH_BLOCKING=1 to find the launch "
             "that caused it";
    case cudaErrorCudartUnloading:
      return "the CUDA runtime is shutting down; do not use cuda devices from static "
             "destructors or atexit handlers";
    default:
      return "errors of earlier asynchronous work can surface here; rerun with "
             "STREAMGRAD_LAUNCH_BLOCKING=1 to report them at the launch that caused them";
  }
}

}  // namespace

namespace cuda_internal {

void check(cudaError_t err, const char* op, int device) {
  if (err == cudaSuccess) return;
  check_cuda(err, absl::StrCat(op, " on cuda:", device).c_str());
}

}  // namespace cuda_internal

void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  // Non-sticky errors also linger as the thread's last error, where a later
  // cudaGetLastError() after a kernel launch would blame the wrong call.
  (void)cudaGetLastError();
  std::string detail;
#if defined(STREAMGRAD_CUDA_EMULATED)
  // The interpreted device knows which kernel, block and thread failed, and how.
  detail = cudaemu::last_error_detail();
  if (!detail.empty()) detail = ". The interpreted device says: " + detail;
#endif
  throw DeviceError(absl::StrCat(what, " failed: ", cudaGetErrorName(err), " (",
                                 cudaGetErrorString(err), "); ", hint_for(err), detail));
}

}  // namespace streamgrad

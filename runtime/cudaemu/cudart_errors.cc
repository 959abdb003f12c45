// The emulated CUDA runtime's error API: names and descriptions of the codes
// cuda_runtime_api.h defines, and the per-thread last error (cudart_state.h keeps it).
#include "cudaemu_runtime.h"
#include "runtime/cudaemu/cudart_state.h"

namespace {

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};

// Descriptions in this project's words.
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "an argument is out of range or null"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation",
     "the device does not have enough free memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError",
     "the runtime could not be initialised"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading",
     "the runtime is shutting down (the process is exiting)"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "the launch configuration is not valid for the device"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "the copy kind is not a cudaMemcpyKind"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "the driver is older than the runtime"},
    {cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable",
     "the devices are busy or unavailable"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "there is no CUDA device"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "the device ordinal is not valid"},
    {cudaErrorECCUncorrectable, "cudaErrorECCUncorrectable",
     "the device memory reported an uncorrectable error"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "the stream or event handle is not valid for this call"},
    {cudaErrorNotReady, "cudaErrorNotReady", "the work has not completed yet"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "device code accessed memory it may not access"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout", "a kernel ran out of time"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled",
     "peer access between these devices is already enabled"},
    {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled",
     "peer access between these devices was never enabled"},
    {cudaErrorAssert, "cudaErrorAssert", "a device-side assertion failed"},
    {cudaErrorHardwareStackError, "cudaErrorHardwareStackError",
     "device code overflowed or corrupted its stack"},
    {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction",
     "device code executed an illegal instruction"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress",
     "device code accessed memory at a misaligned address"},
    {cudaErrorInvalidAddressSpace, "cudaErrorInvalidAddressSpace",
     "device code used an address in the wrong address space"},
    {cudaErrorInvalidPc, "cudaErrorInvalidPc", "device code jumped to an invalid address"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "device code failed while running"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "the call is not permitted here"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "the call is not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "an unknown error"},
};

const ErrorText* lookup(cudaError_t code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

}  // namespace

using streamgrad::cudaemu::internal::Runtime;
namespace internal = streamgrad::cudaemu::internal;

extern "C" {

const char* cudaGetErrorName(cudaError_t error) {
  const ErrorText* e = lookup(error);
  return e != nullptr ? e->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  const ErrorText* e = lookup(error);
  return e != nullptr ? e->text : "an unrecognised error code";
}

// A sticky error of the current device is returned every time, as CUDA does: only a reset
// of the device clears it.
cudaError_t cudaGetLastError(void) {
  const cudaError_t sticky = Runtime::get().sticky(internal::current_device(), nullptr);
  const cudaError_t last = internal::last_error();
  internal::clear_last_error();
  return sticky != cudaSuccess ? sticky : last;
}

cudaError_t cudaPeekAtLastError(void) {
  const cudaError_t sticky = Runtime::get().sticky(internal::current_device(), nullptr);
  return sticky != cudaSuccess ? sticky : internal::last_error();
}

}  // extern "C"

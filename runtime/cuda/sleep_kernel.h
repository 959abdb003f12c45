// The sleep kernel: keeps a CUDA stream busy for a given time without occupying the host,
// so that tests and benchmarks can widen the window in which a missing wait shows up.
//
// Offers:
//   launch_sleep_kernel(stream, us)   enqueues one single-thread kernel on `stream` that
//                                     returns once `us` microseconds have passed on the
//                                     device's global nanosecond timer (precise to a few
//                                     µs: the timer ticks about every µs, the wait naps).
//
// The caller must have made the stream's device current (kernel launches go to the
// current device; CudaBackend::sleep does this).
// Thread-safety: may be called from any thread.
// Failure: throws streamgrad::DeviceError if the launch fails; errors of the kernel itself
// (there are none to expect) would surface at the next synchronisation of the stream.
#ifndef STREAMGRAD_RUNTIME_CUDA_SLEEP_KERNEL_H_
#define STREAMGRAD_RUNTIME_CUDA_SLEEP_KERNEL_H_

#include <cuda_runtime_api.h>

namespace streamgrad {

// Negative or NaN durations sleep for 0 µs.
void launch_sleep_kernel(cudaStream_t stream, double microseconds);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDA_SLEEP_KERNEL_H_

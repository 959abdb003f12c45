// What CUDA code outside runtime/ (kernels/cuda, cuBLAS and cuDNN calls) needs from the
// cuda backend: the raw handle behind a streamgrad Stream, and one way to turn CUDA
// error codes into streamgrad exceptions.
//
// Offers:
//   raw_cuda_stream(stream)   the cudaStream_t of a "cuda:N" stream. Id 0 is a per-device
//                             non-blocking stream created on first use, never the legacy
//                             default stream: work on it has no implicit order with other
//                             streams (See Note [Backward stream semantics]).
//   check_cuda(err, what)     returns on cudaSuccess; otherwise clears the thread's last
//                             CUDA error and throws DeviceError naming the error, `what`,
//                             and what to do.
//
//   launch(stream, {"relu", reads, writes}, [=] {
//     relu_kernel<<<blocks, threads, 0, raw_cuda_stream(stream)>>>(y, x, n);
//     check_cuda(cudaGetLastError(), "relu on cuda:0");
//   });
//
// Inside launch()/Backend::submit the stream's device is the current CUDA device, as
// kernel launches require; elsewhere the caller makes it current (DeviceGuard).
// Thread-safety: both functions may be called from any thread; the handle stays valid
// for the life of the process (streams are never destroyed, as in libtorch's pool).
// Failure: DeviceError for a stream of another device type, a device that does not
// exist, an id the device never created, or a CUDA failure while creating stream 0.
#ifndef STREAMGRAD_RUNTIME_CUDA_CUDA_STREAM_H_
#define STREAMGRAD_RUNTIME_CUDA_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

#include "runtime/backend/stream.h"

namespace streamgrad {

cudaStream_t raw_cuda_stream(const Stream& stream);

void check_cuda(cudaError_t err, const char* what);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDA_CUDA_STREAM_H_

// launch_kernel: the one place where the project launches a CUDA kernel, so that the
// interpreted CUDA device (runtime/cudaemu) can take every launch over in its build
// configuration. With nvcc it is the ordinary `<<<grid, block, 0, stream>>>` launch
// followed by the launch's error check, which a hand-written launch could forget.
//
//   launch_kernel("relu on cuda", relu_kernel<float>, blocks_for(n), kThreads,
//                 raw_cuda_stream(stream), y, x, n);
//
// `kernel` is a __global__ function (a template's specialisation named with all its
// arguments, or a pointer to one); args are converted to its parameters as a launch
// converts them. `what` names the op in the error message.
//
// Thread-safety: as a launch: any thread whose current device is the stream's (inside
// launch()/Backend::submit it is). Failure: DeviceError through check_cuda when the launch
// is refused (a bad configuration, or an error of earlier asynchronous work surfacing).
#ifndef STREAMGRAD_RUNTIME_CUDA_KERNEL_LAUNCH_H_
#define STREAMGRAD_RUNTIME_CUDA_KERNEL_LAUNCH_H_

#include <cuda_runtime.h>

#include <utility>

#include "runtime/cuda/cuda_stream.h"

#if !defined(__CUDACC__)
#error "kernel_launch.h launches kernels: include it from CUDA sources (.cu) only"
#endif

namespace streamgrad {

template <typename... Params, typename... Args>
void launch_kernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block,
                   cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "a launch passes every parameter");
  kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
  // A launch reports a refused configuration only through the thread's last error.
  check_cuda(cudaGetLastError(), what);
}

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDA_KERNEL_LAUNCH_H_

// launch_kernel: the one place where the project launches a CUDA kernel. With nvcc it is
// the ordinary `<<<grid, block, 0, stream>>>` launch followed by the launch's error check,
// which a hand-written launch could forget. In the interpreted configuration
// (STREAMGRAD_CUDA_EMULATED, runtime/cudaemu) it does what a GPU's launch does, on the
// CPU: the configuration is checked at once (a refused one is the thread's last error,
// cudaErrorInvalidConfiguration), the arguments are copied, and the grid runs later on
// the stream, in stream order, through the block interpreter.
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

#if defined(STREAMGRAD_CUDA_EMULATED)
#include <string>
#include <tuple>
#include <type_traits>

#include "cudaemu_runtime.h"
#include "runtime/base/error.h"
#include "runtime/cudaemu/emu_launch.h"
#elif !defined(__CUDACC__)
#error "kernel_launch.h launches kernels: include it from CUDA sources (.cu) only"
#endif

namespace streamgrad {

template <typename... Params, typename... Args>
void launch_kernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block,
                   cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "a launch passes every parameter");
#if defined(STREAMGRAD_CUDA_EMULATED)
  bool refused = false;
  try {
    cudaemu::check_launch(what, grid, block, 0, cudaemu::emu_launch_options());
  } catch (const DeviceError& e) {
    cudaemu::set_last_error(cudaErrorInvalidConfiguration, e.what());
    refused = true;
  }
  if (!refused) {
    // `what` may not outlive this call; the arguments are copied as a launch copies them.
    (void)cudaemu::enqueue_on_stream(
        stream, what,
        [name = std::string(what), kernel, grid, block,
         params = std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)]() {
          std::apply(
              [&](const auto&... p) {
                cudaemu::emu_launch(name.c_str(), grid, block, 0, kernel, p...);
              },
              params);
        });
  }
#else
  kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
#endif
  // A launch reports a refused configuration only through the thread's last error.
  check_cuda(cudaGetLastError(), what);
}

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDA_KERNEL_LAUNCH_H_

// launch_kernel: the one place where the project launches a CUDA kernel. With nvcc it is
// the ordinary `<<<grid, block, 0, stream>>>` launch followed by the launch's error check,
// which a hand-written launch could forget. In the interpreted configuration
// (STREAMGRAD_CUDA_EMULATED, runtime/cudaemu) it does what a GPU's launch does, on the
// CPU: the configuration is checked at once (a refused one is the thread's last error,
// cudaErrorInvalidConfiguration), the arguments are copied, and the grid runs later on
// the stream, in stream order, through the block interpreter.
//
//   launch_kernel("relu on cuda", SG_KERNEL(relu_kernel<float>), blocks_for(n), kThreads,
//                 raw_cuda_stream(stream), y, x, n);
//
// SG_KERNEL(k) names a __global__ function (a template's specialisation with all its
// arguments) together with its source spelling, which the interpreted device records for
// its coverage list (cudaemu::launched_kernels); args are converted to the kernel's
// parameters as a launch converts them. `what` names the op in the error message.
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
#include "runtime/cudaemu/block_runner.h"
#include "runtime/cudaemu/emu_launch.h"
#elif !defined(__CUDACC__)
#error "kernel_launch.h launches kernels: include it from CUDA sources (.cu) only"
#endif

namespace streamgrad {

template <typename Fn>
struct KernelRef {
  Fn fn;
  const char* name;  // as the source spells it, template arguments included
};

#define SG_KERNEL(...) \
  ::streamgrad::KernelRef<decltype(&__VA_ARGS__)> { &__VA_ARGS__, #__VA_ARGS__ }

template <typename... Params, typename... Args>
void launch_kernel(const char* what, KernelRef<void (*)(Params...)> ref, dim3 grid, dim3 block,
                   cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "a launch passes every parameter");
  void (*const kernel)(Params...) = ref.fn;
#if defined(STREAMGRAD_CUDA_EMULATED)
  cudaemu::note_kernel(ref.name);
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

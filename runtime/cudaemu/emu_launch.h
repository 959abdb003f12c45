// emu_launch: the emulation's `kernel<<<grid, block, shared_bytes>>>(args...)`.
//
// Offers:
//   emu_launch(name, grid, block, shared_bytes, kernel, args...)
//       runs kernel(args...) on every thread of the grid (block_runner.h says how) and
//       returns when all have finished: a launch is synchronous. `kernel` is a __global__
//       function (its parameters are built from args once, as CUDA copies them into the
//       launch, and each thread gets its own copy) or any callable. `name` names the
//       launch in error messages.
//   emu_launch_with(options, name, grid, block, shared_bytes, kernel, args...)
//       the same with explicit LaunchOptions (thread order, seed, shared memory opt-in)
//       instead of emu_launch_options().
//
// Thread-safety: launches on different OS threads run independently and at once.
// Failure: streamgrad::DeviceError for a launch the device would refuse (zero blocks or
// threads, a block over 1024 threads or a dimension over (1024, 1024, 64), a grid over
// (2^31 - 1, 65535, 65535), dynamic shared memory over the allowance) before any thread
// runs, and for every failed check while it runs; an exception thrown by kernel code is
// rethrown here (see block_runner.h).
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_EMU_LAUNCH_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_EMU_LAUNCH_H_

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "runtime/cudaemu/block_runner.h"
#include "runtime/cudaemu/dim3.h"

namespace streamgrad {
namespace cudaemu {
namespace internal {

template <typename Kernel, typename Params>
struct Bound {
  Kernel kernel;
  Params params;
  static void invoke(void* self) {
    auto* b = static_cast<Bound*>(self);
    // Each thread calls with copies: a kernel may change its own parameters.
    Params copy = b->params;
    std::apply(b->kernel, std::move(copy));
  }
};

template <typename Kernel, typename Params>
void launch_bound(const LaunchOptions& options, const char* name, dim3 grid, dim3 block,
                  size_t shared_bytes, Kernel kernel, Params params) {
  Bound<Kernel, Params> bound{kernel, std::move(params)};
  run_launch(name, grid, block, shared_bytes, options, &Bound<Kernel, Params>::invoke, &bound);
}

}  // namespace internal

template <typename... Params, typename... Args>
void emu_launch_with(const LaunchOptions& options, const char* name, dim3 grid, dim3 block,
                     size_t shared_bytes, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "a kernel takes all its arguments");
  internal::launch_bound(options, name, grid, block, shared_bytes, kernel,
                         std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...));
}

template <typename Kernel, typename... Args,
          typename = std::enable_if_t<!std::is_function<std::remove_pointer_t<Kernel>>::value>>
void emu_launch_with(const LaunchOptions& options, const char* name, dim3 grid, dim3 block,
                     size_t shared_bytes, Kernel kernel, Args&&... args) {
  internal::launch_bound(options, name, grid, block, shared_bytes, kernel,
                         std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...));
}

template <typename Kernel, typename... Args>
void emu_launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes, Kernel&& kernel,
                Args&&... args) {
  emu_launch_with(emu_launch_options(), name, grid, block, shared_bytes,
                  std::forward<Kernel>(kernel), std::forward<Args>(args)...);
}

}  // namespace cudaemu
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_EMU_LAUNCH_H_

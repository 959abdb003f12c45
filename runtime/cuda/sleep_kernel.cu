#include "runtime/cuda/sleep_kernel.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "runtime/base/error.h"

#if defined(STREAMGRAD_CUDA_EMULATED)
#include "cudaemu_runtime.h"
#endif

namespace streamgrad {
namespace {

// About 292 years: anything longer is a caller's mistake, and the cast must not overflow.
constexpr double kMaxNs = 9.2e18;

// The sleep in nanoseconds; `!(ns > 0)` also sends NaN to 0.
uint64_t budget_ns(double microseconds) {
  const double ns = microseconds * 1000.0;
  return !(ns > 0) ? 0 : static_cast<uint64_t>(ns < kMaxNs ? ns : kMaxNs);
}

[[noreturn]] void launch_failed(cudaError_t err) {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError();
  throw DeviceError(std::string("sleep: launching the sleep kernel on cuda:") +
                    std::to_string(device) + " failed: " + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) +
                    "); errors of earlier asynchronous work can surface here, rerun with "
                    "STREAMGRAD_LAUNCH_BLOCKING=1 to report them at the launch that caused "
                    "them");
}

#if defined(STREAMGRAD_CUDA_EMULATED)

}  // namespace

// The interpreted device has no global timer to spin on: its stream sleeps on the host
// thread that runs it, which keeps the stream busy just as long.
void launch_sleep_kernel(cudaStream_t stream, double microseconds) {
  const uint64_t ns = budget_ns(microseconds);
  const cudaError_t err = cudaemu::enqueue_on_stream(stream, "sleep", [ns] {
    std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<int64_t>(ns)));
  });
  if (err != cudaSuccess) launch_failed(err);
}

#else

// %globaltimer counts nanoseconds and is shared by every SM; clock64() would count cycles
// of one SM at a clock rate that changes under boost, so a cycle budget is no time budget.
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Short naps keep the waiting warp off the issue slots of kernels sharing the SM; a sleep
// needs microsecond precision at best, and the timer itself ticks about that often.
constexpr unsigned kNapNs = 1000;

__global__ void sleep_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_ns();
  while (global_ns() - start < nanoseconds) __nanosleep(kNapNs);
}

}  // namespace

void launch_sleep_kernel(cudaStream_t stream, double microseconds) {
  sleep_kernel<<<1, 1, 0, stream>>>(budget_ns(microseconds));
  // A launch reports configuration errors only through the thread's last error.
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) launch_failed(err);
}

#endif  // STREAMGRAD_CUDA_EMULATED

}  // namespace streamgrad

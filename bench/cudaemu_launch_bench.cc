// Launch overhead of the interpreted CUDA device (runtime/cudaemu): 64 blocks x 256
// threads of a trivial kernel, of one with two barriers, and of a warp-shuffle reduction;
// prints the median time per launch over 21 launches after one warm-up launch (which
// maps the fiber stacks).
//
// bazel run -c opt //bench:cudaemu_launch_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "runtime/cudaemu/cuda_emu.h"

namespace {

__global__ void trivial(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

__global__ void two_barriers(float* out) {
  SG_SHARED_ARRAY(float, s, 256);
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  const float v = s[255 - threadIdx.x];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

__global__ void warp_reduce(float* out) {
  float v = 1.0f;
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, o);
  if (threadIdx.x % 32 == 0) out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

template <typename Kernel>
double median_ms(const char* name, Kernel kernel, float* out) {
  using streamgrad::cudaemu::emu_launch;
  emu_launch(name, 64, 256, 0, kernel, out);
  std::vector<double> ms;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    emu_launch(name, 64, 256, 0, kernel, out);
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  std::vector<float> out(64 * 256);
  const double t = median_ms("trivial", trivial, out.data());
  const double b = median_ms("two_barriers", two_barriers, out.data());
  const double w = median_ms("warp_reduce", warp_reduce, out.data());
  const double threads = 64.0 * 256.0;
  std::printf("64 blocks x 256 threads, median of 21 launches:\n");
  std::printf("  trivial        %8.3f ms  (%6.1f ns per thread)\n", t, t * 1e6 / threads);
  std::printf("  two barriers   %8.3f ms  (%6.1f ns per thread)\n", b, b * 1e6 / threads);
  std::printf("  warp shuffles  %8.3f ms  (%6.1f ns per thread)\n", w, w * 1e6 / threads);
  return 0;
}

// The GPU figures issue 12 asks for, on one cuda device (bench/gpu.sh runs it):
//   copy     device-to-device cudaMemcpyAsync bandwidth (the reference)
//   add      streamgrad's element-wise add (kernels::binary) bandwidth, and its ratio to copy
//   matmul   float32 4096^3 through kernels::matmul against cublasSgemm called directly
//   chain    backward of a 1000-node mul chain on the device: host time per node
// Timings of device work use timing events on one stream, median of the repetitions.
//
//   bazel run -c opt //bench:gpu_bench -- [--device=cuda:0] [--reps=20]
//
// Without a GPU it says so and exits 2.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "runtime/cuda/cuda_stream.h"
#include "streamgrad.h"

namespace streamgrad {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median device time (ms) of `work` enqueued on `s`, after one warm-up run.
template <typename Work>
double time_on(const Stream& s, int reps, Work work) {
  work();
  synchronize(s.device());
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    Event start(true), end(true);
    start.record(s);
    work();
    end.record(s);
    end.synchronize();
    ms.push_back(start.elapsed_ms(end));
  }
  return median(ms);
}

kernels::View flat(const Storage& st, int64_t n) {
  kernels::View v;
  v.data = st.data();
  v.dtype = DType::kFloat32;
  v.sizes = {n};
  v.strides = {1};
  return v;
}

int run(const Device d, int reps) {
  const Stream s = current_stream(d);
  StreamGuard guard(s);
  const int64_t n = int64_t(64) << 20;  // 64 Mi floats: 256 MiB per buffer
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  Storage a = Storage::allocate(bytes, s), b = Storage::allocate(bytes, s),
          c = Storage::allocate(bytes, s);
  kernels::fill(s, flat(a, n), 1.0);
  kernels::fill(s, flat(b, n), 2.0);
  const double copy_ms = time_on(s, reps, [&] {
    check_cuda(cudaMemcpyAsync(c.data(), a.data(), bytes, cudaMemcpyDeviceToDevice,
                               raw_cuda_stream(s)),
               "gpu_bench copy");
  });
  const double add_ms = time_on(s, reps, [&] {
    kernels::binary(s, kernels::Binary::kAdd, flat(c, n), flat(a, n), flat(b, n));
  });
  const double copy_gbs = 2.0 * bytes / copy_ms / 1e6, add_gbs = 3.0 * bytes / add_ms / 1e6;
  std::printf("%-8s %-40s %12s\n", "case", "metric", "value");
  std::printf("%-8s %-40s %12.1f\n", "copy", "device-to-device GB/s (read + write)", copy_gbs);
  std::printf("%-8s %-40s %12.1f\n", "add", "element-wise add GB/s (2 reads + write)", add_gbs);
  std::printf("%-8s %-40s %12.3f\n", "add", "ratio to copy (goal >= 0.8)", add_gbs / copy_gbs);

  const int m = 4096;
  const size_t mbytes = static_cast<size_t>(m) * m * sizeof(float);
  Storage x = Storage::allocate(mbytes, s), y = Storage::allocate(mbytes, s),
          z = Storage::allocate(mbytes, s);
  kernels::View vx = flat(x, int64_t(m) * m), vy = flat(y, int64_t(m) * m),
                vz = flat(z, int64_t(m) * m);
  for (kernels::View* v : {&vx, &vy, &vz}) {
    v->sizes = {m, m};
    v->strides = {m, 1};
  }
  kernels::uniform(s, vx, -1, 1, 1, 0);
  kernels::uniform(s, vy, -1, 1, 2, 0);
  set_matmul_allow_tf32(false);
  const double ours_ms = time_on(s, reps, [&] { kernels::matmul(s, vz, vx, vy); });
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    throw DeviceError("gpu_bench: cublasCreate failed");
  }
  cublasSetStream(h, raw_cuda_stream(s));
  const float one = 1, zero = 0;
  const double direct_ms = time_on(s, reps, [&] {
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, static_cast<const float*>(y.data()),
                m, static_cast<const float*>(x.data()), m, &zero, static_cast<float*>(z.data()),
                m);
  });
  cublasDestroy(h);
  const double flop = 2.0 * m * m * m;
  std::printf("%-8s %-40s %12.1f\n", "matmul", "streamgrad float32 4096^3 TFLOP/s",
              flop / ours_ms / 1e9);
  std::printf("%-8s %-40s %12.1f\n", "matmul", "cublasSgemm direct TFLOP/s", flop / direct_ms / 1e9);
  std::printf("%-8s %-40s %12.3f\n", "matmul", "ratio to direct", direct_ms / ours_ms);

  // Backward of a mul chain: host time per node, the device drained at the end.
  std::vector<double> per_node;
  for (int r = 0; r < reps; ++r) {
    Tensor leaf = ones({1}, TensorOptions().device(d)).requires_grad_();
    Tensor t = leaf;
    for (int i = 0; i < 1000; ++i) t = mul(t, 1.0001);
    Tensor loss = sum(t);
    t = Tensor();
    synchronize(d);
    const auto t0 = std::chrono::steady_clock::now();
    loss.backward();
    synchronize(d);
    per_node.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        1002);
  }
  std::printf("%-8s %-40s %12.2f\n", "chain", "backward us per node (1000 mul, numel 1)",
              median(per_node));
  return 0;
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  std::string device = "cuda:0";
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--device=", 9) == 0) {
      device = argv[i] + 9;
    } else if (std::strncmp(argv[i], "--reps=", 7) == 0) {
      reps = std::max(1, std::atoi(argv[i] + 7));
    } else {
      std::fprintf(stderr, "usage: gpu_bench [--device=cuda:N] [--reps=R]\n");
      return 2;
    }
  }
  if (streamgrad::device_count(streamgrad::DeviceType::kCuda) == 0) {
    std::fprintf(stderr, "gpu_bench: no cuda device on this machine; nothing measured\n");
    return 2;
  }
  try {
    return streamgrad::run(streamgrad::Device(device), reps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
}

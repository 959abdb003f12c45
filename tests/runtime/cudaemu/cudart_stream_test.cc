// The emulated CUDA runtime's streams, events, asynchronous errors and kernels. Ordering
// tests run under the deterministic adversarial scheduler (the newest runnable work runs
// first), so a missing wait is a wrong value on every run.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/cudaemu/cudart_test_util.h"

namespace {

__global__ void axpy(int n, float a, const float* x, float* y) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + y[i];
}

// Indexes its 32-element shared array with a thread index that reaches 63.
__global__ void shared_out_of_bounds(float* out) {
  SG_SHARED_ARRAY(float, tile, 32);
  tile[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}

}  // namespace

namespace streamgrad {
namespace cudaemu_test {
namespace {

cudaStream_t make_stream(unsigned flags) {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, flags) == cudaSuccess);
  return s;
}

// Enqueues `dst = src` (host ints) as work on `s`.
void copy_on(cudaStream_t s, const int* src, int* dst) {
  CUDA_OK(cudaemu::enqueue_on_stream(s, "copy", [src, dst] { *dst = *src; }));
}

TEST_CASE("non-blocking streams run out of order unless an event orders them", "[cudart]") {
  Fresh fresh;
  const bool with_wait = GENERATE(false, true);
  cudaStream_t producer = make_stream(cudaStreamNonBlocking);
  cudaStream_t consumer = make_stream(cudaStreamNonBlocking);
  int one = 1, x = 0, seen = -1;
  copy_on(producer, &one, &x);
  cudaEvent_t written;
  CUDA_OK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  CUDA_OK(cudaEventRecord(written, producer));
  if (with_wait) CUDA_OK(cudaStreamWaitEvent(consumer, written, 0));
  copy_on(consumer, &x, &seen);
  CUDA_OK(cudaDeviceSynchronize());
  CHECK(seen == (with_wait ? 1 : 0));
}

// Records what the ordering listener was told, as "record e@s dN" / "wait s dN e".
struct Listener final : cudaemu::OrderingListener {
  void on_record(uintptr_t event, uintptr_t stream, int device) override {
    told.push_back("record " + std::to_string(event) + "@" + std::to_string(stream) + " d" +
                   std::to_string(device));
  }
  void on_wait(uintptr_t stream, int device, uintptr_t event) override {
    told.push_back("wait " + std::to_string(stream) + " d" + std::to_string(device) + " " +
                   std::to_string(event));
  }
  std::vector<std::string> told;
};

TEST_CASE("the ordering listener hears the records and waits the runtime performed",
          "[cudart]") {
  Fresh fresh;
  Listener listener;
  cudaemu::set_ordering_listener(&listener);
  cudaStream_t a = make_stream(cudaStreamNonBlocking);
  cudaStream_t b = make_stream(cudaStreamNonBlocking);
  CUDA_OK(cudaemu::set_user_data(a, 11));
  CUDA_OK(cudaemu::set_user_data(b, 12));
  cudaEvent_t e, never;
  CUDA_OK(cudaEventCreate(&e));
  CUDA_OK(cudaEventCreate(&never));
  CUDA_OK(cudaemu::set_user_data(e, 21));
  CUDA_OK(cudaEventRecord(e, a));
  CUDA_OK(cudaStreamWaitEvent(b, e, 0));
  CUDA_OK(cudaStreamWaitEvent(b, never, 0));  // never recorded: orders nothing, not told
  CHECK(cudaStreamWaitEvent(b, e, 1) == cudaErrorInvalidValue);  // refused: not told
  (void)cudaGetLastError();
  CUDA_OK(cudaSetDevice(1));
  cudaStream_t c = make_stream(cudaStreamNonBlocking);  // no user data: told as 0
  CUDA_OK(cudaStreamWaitEvent(c, e, 0));                // across devices
  CUDA_OK(cudaSetDevice(0));
  CHECK(listener.told ==
        std::vector<std::string>{"record 21@11 d0", "wait 12 d0 21", "wait 0 d1 21"});
  // The legacy stream has no user data of its own to give.
  CHECK(cudaemu::set_user_data(cudaStreamLegacy, 1) == cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
  cudaemu::set_ordering_listener(nullptr);
  CUDA_OK(cudaEventRecord(e, a));
  CHECK(listener.told.size() == 3);
  CUDA_OK(cudaDeviceSynchronize());
}

TEST_CASE("the threaded scheduler runs streams concurrently and the host asynchronously",
          "[cudart]") {
  Fresh fresh(SimSchedulerOptions{});
  cudaStream_t a = make_stream(cudaStreamNonBlocking);
  cudaStream_t b = make_stream(cudaStreamNonBlocking);
  std::atomic<int> stage{0};
  // a's work waits for b's, enqueued after it; b's waits for the host, which gets there
  // only because enqueueing returned at once. Serialised streams would time out here.
  auto wait_for = [&stage](int value) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (stage.load() < value && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    if (stage.load() < value) throw std::runtime_error("never reached");
  };
  CUDA_OK(cudaemu::enqueue_on_stream(a, "a", [&] { wait_for(2); stage = 3; }));
  CUDA_OK(cudaemu::enqueue_on_stream(b, "b", [&] { wait_for(1); stage = 2; }));
  stage = 1;
  CUDA_OK(cudaStreamSynchronize(a));
  CHECK(stage.load() == 3);
}

TEST_CASE("cudaStreamQuery and cudaEventQuery answer not ready while work is queued",
          "[cudart]") {
  Fresh fresh;
  cudaStream_t s = make_stream(cudaStreamNonBlocking);
  int one = 1, x = 0;
  copy_on(s, &one, &x);
  cudaEvent_t e;
  CUDA_OK(cudaEventCreate(&e));
  CHECK(cudaEventQuery(e) == cudaSuccess);  // never recorded
  CUDA_OK(cudaEventRecord(e, s));
  CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
  CHECK(cudaEventQuery(e) == cudaErrorNotReady);
  CHECK(cudaGetLastError() == cudaErrorNotReady);
  CUDA_OK(cudaEventSynchronize(e));
  CHECK(x == 1);
  CUDA_OK(cudaEventQuery(e));
  CUDA_OK(cudaStreamQuery(s));
  CUDA_OK(cudaEventDestroy(e));
  CUDA_OK(cudaStreamDestroy(s));
  CHECK(cudaStreamQuery(s) == cudaErrorInvalidResourceHandle);
  CHECK(cudaemu::enqueue_on_stream(s, "late", [] {}) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventQuery(e) == cudaErrorInvalidResourceHandle);
}

TEST_CASE("events: elapsed time, timing disabled, re-recording", "[cudart]") {
  Fresh fresh;
  cudaStream_t s = make_stream(cudaStreamNonBlocking);
  cudaEvent_t start, end, untimed;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreateWithFlags(&end, cudaEventDefault));
  CUDA_OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, start, end) == cudaErrorInvalidResourceHandle);  // unrecorded
  int one = 1, x = 0, later = 0;
  CUDA_OK(cudaEventRecord(start, s));
  copy_on(s, &one, &x);
  CUDA_OK(cudaEventRecord(end, s));
  CUDA_OK(cudaEventRecord(untimed, s));
  CHECK(cudaEventElapsedTime(&ms, start, end) == cudaErrorNotReady);
  copy_on(s, &one, &later);
  CUDA_OK(cudaEventSynchronize(end));
  CHECK(x == 1);      // the work before the record ran...
  CHECK(later == 0);  // ...and the work after it did not, yet
  CUDA_OK(cudaEventElapsedTime(&ms, start, end));
  CHECK(ms >= 0);
  CHECK(cudaEventElapsedTime(&ms, start, untimed) == cudaErrorInvalidResourceHandle);

  // A new record replaces the old one: the event is pending again.
  copy_on(s, &one, &later);
  CUDA_OK(cudaEventRecord(end, s));
  CHECK(cudaEventQuery(end) == cudaErrorNotReady);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaEventQuery(end));

  CUDA_OK(cudaSetDevice(1));
  cudaStream_t other = make_stream(cudaStreamNonBlocking);
  CHECK(cudaEventRecord(start, other) == cudaErrorInvalidResourceHandle);  // device 0's event
  CUDA_OK(cudaStreamWaitEvent(other, start, 0));  // waiting across devices is fine
  CUDA_OK(cudaStreamSynchronize(other));
  for (cudaEvent_t e : {start, end, untimed}) CUDA_OK(cudaEventDestroy(e));
}

TEST_CASE("the legacy default stream orders with blocking streams both ways", "[cudart]") {
  Fresh fresh;
  const cudaStream_t legacy = GENERATE(cudaStream_t{nullptr}, cudaStreamLegacy);
  cudaStream_t blocking = make_stream(cudaStreamDefault);
  int one = 1, two = 2, x = 0, seen = -1;
  copy_on(blocking, &one, &x);
  copy_on(legacy, &x, &seen);  // waits for the blocking stream's write
  CUDA_OK(cudaDeviceSynchronize());
  CHECK(seen == 1);
  copy_on(legacy, &two, &x);
  copy_on(blocking, &x, &seen);  // waits for the legacy stream's write
  CUDA_OK(cudaStreamSynchronize(blocking));
  CHECK(seen == 2);
  // A blocking stream destroyed with work queued: the legacy stream still waits for it.
  cudaStream_t doomed = make_stream(cudaStreamDefault);
  copy_on(doomed, &one, &x);
  CUDA_OK(cudaStreamDestroy(doomed));
  copy_on(legacy, &x, &seen);
  CUDA_OK(cudaDeviceSynchronize());
  CHECK(seen == 1);
}

TEST_CASE("stream creation: flags, priorities, the legacy stream's handle", "[cudart]") {
  Fresh fresh;
  cudaStream_t s = nullptr;
  CHECK(cudaStreamCreateWithFlags(&s, 0x10) == cudaErrorInvalidValue);
  CUDA_OK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -100));  // clamped
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaStreamCreate(&s));
  CUDA_OK(cudaStreamDestroy(s));
  CHECK(cudaStreamDestroy(nullptr) == cudaErrorInvalidResourceHandle);
  CHECK(cudaStreamDestroy(s) == cudaErrorInvalidResourceHandle);
  CUDA_OK(cudaStreamQuery(nullptr));
  CUDA_OK(cudaStreamSynchronize(cudaStreamLegacy));
  // cudaStreamGetFlags: the flags a stream was made with; the legacy stream is blocking;
  // the per-thread default stream is not emulated.
  unsigned flags = 99;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamGetFlags(s, &flags));
  CHECK(flags == cudaStreamNonBlocking);
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaStreamCreate(&s));
  CUDA_OK(cudaStreamGetFlags(s, &flags));
  CHECK(flags == cudaStreamDefault);
  CUDA_OK(cudaStreamDestroy(s));
  flags = 99;
  CUDA_OK(cudaStreamGetFlags(nullptr, &flags));
  CHECK(flags == cudaStreamDefault);
  CHECK(cudaStreamGetFlags(s, &flags) == cudaErrorInvalidResourceHandle);
  CHECK(cudaStreamGetFlags(cudaStreamPerThread, &flags) == cudaErrorInvalidResourceHandle);
  CHECK(cudaStreamGetFlags(nullptr, nullptr) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

TEST_CASE("the legacy default stream does not order with non-blocking streams", "[cudart]") {
  Fresh fresh;
  cudaStream_t free_running = make_stream(cudaStreamNonBlocking);
  int one = 1, two = 2, x = 0, seen = -1;
  copy_on(free_running, &one, &x);
  copy_on(nullptr, &x, &seen);  // the newest work: runs first
  CUDA_OK(cudaDeviceSynchronize());
  CHECK(seen == 0);
  copy_on(nullptr, &two, &x);
  copy_on(free_running, &x, &seen);
  CUDA_OK(cudaDeviceSynchronize());
  CHECK(seen == 1);
}

TEST_CASE("cudaMemcpy waits for blocking streams", "[cudart]") {
  Fresh fresh;
  cudaStream_t blocking = make_stream(cudaStreamDefault);
  int* d = nullptr;
  CUDA_OK(cudaMalloc(&d, sizeof(int)));
  CUDA_OK(cudaMemsetAsync(d, 0x07, sizeof(int), blocking));
  int back = 0;
  CUDA_OK(cudaMemcpy(&back, d, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(back == 0x07070707);
  CUDA_OK(cudaFree(d));
}

TEST_CASE("cudaMemcpy does not wait for non-blocking streams", "[cudart]") {
  Fresh fresh(SimSchedulerOptions{});
  cudaStream_t free_running = make_stream(cudaStreamNonBlocking);
  std::atomic<bool> host_done{false};
  // The work waits for the host to pass cudaMemcpy: if cudaMemcpy waited for it, it would
  // give up and fail the device.
  CUDA_OK(cudaemu::enqueue_on_stream(free_running, "waits for the host", [&] {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!host_done.load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    if (!host_done.load()) throw std::runtime_error("cudaMemcpy waited for this stream");
  }));
  int src = 5, dst = 0;
  CUDA_OK(cudaMemcpy(&dst, &src, sizeof(int), cudaMemcpyHostToHost));
  host_done = true;
  CHECK(dst == 5);
  CUDA_OK(cudaStreamSynchronize(free_running));
}

TEST_CASE("a kernel on a stream computes axpy", "[cudart]") {
  Fresh fresh;
  constexpr int n = 300;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  float* dx = nullptr;
  float* dy = nullptr;
  CUDA_OK(cudaMalloc(&dx, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&dy, n * sizeof(float)));
  cudaStream_t s = make_stream(cudaStreamNonBlocking);
  CUDA_OK(cudaMemcpyAsync(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaMemcpyAsync(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaemu::enqueue_on_stream(s, "axpy", [=] {
    cudaemu::emu_launch("axpy", dim3((n + 127) / 128), dim3(128), 0, axpy, n, 2.0f, dx, dy);
  }));
  CUDA_OK(cudaMemcpyAsync(out.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; ++i) REQUIRE(out[i] == 2.0f * i + 1.0f);
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dy));
}

TEST_CASE("a kernel fault is the device's sticky error, with the interpreter's message",
          "[cudart]") {
  Fresh fresh;
  float* out = nullptr;
  CUDA_OK(cudaMalloc(&out, 64 * sizeof(float)));
  cudaStream_t s = make_stream(cudaStreamNonBlocking);
  CUDA_OK(cudaemu::enqueue_on_stream(s, "shared_out_of_bounds", [=] {
    cudaemu::emu_launch("shared_out_of_bounds", dim3(1), dim3(64), 0, shared_out_of_bounds,
                        out);
  }));
  bool ran_after = false;
  CUDA_OK(cudaemu::enqueue_on_stream(s, "after", [&] { ran_after = true; }));
  CHECK(cudaStreamSynchronize(s) == cudaErrorIllegalAddress);
  const std::string detail = cudaemu::last_error_detail();
  CHECK(detail.find("shared_out_of_bounds") != std::string::npos);
  CHECK(detail.find("shared array 'tile'") != std::string::npos);
  CHECK_FALSE(ran_after);  // the context is unusable: later work is skipped
  // Sticky: every later call on the device reports it, and reading it does not clear it.
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
  CHECK(cudaStreamSynchronize(s) == cudaErrorIllegalAddress);
  CHECK(cudaDeviceSynchronize() == cudaErrorIllegalAddress);
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 16) == cudaErrorIllegalAddress);
  CHECK(cudaemu::enqueue_on_stream(s, "more", [] {}) == cudaErrorIllegalAddress);
  // The other device is unaffected.
  CUDA_OK(cudaSetDevice(1));
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);  // the thread's last call failed
  CHECK(cudaGetLastError() == cudaSuccess);
  CUDA_OK(cudaMalloc(&p, 16));
  CUDA_OK(cudaDeviceSynchronize());
}

TEST_CASE("an exception thrown by work on a stream is a launch failure", "[cudart]") {
  Fresh fresh;
  CUDA_OK(cudaemu::enqueue_on_stream(nullptr, "thrower",
                                     [] { throw std::runtime_error("it broke"); }));
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(cudaemu::last_error_detail().find("thrower") != std::string::npos);
  CHECK(cudaemu::last_error_detail().find("it broke") != std::string::npos);
}

TEST_CASE("work on a stream may not call the runtime", "[cudart]") {
  Fresh fresh;
  cudaError_t inside = cudaSuccess;
  CUDA_OK(cudaemu::enqueue_on_stream(nullptr, "caller", [&] {
    void* p = nullptr;
    inside = cudaMalloc(&p, 16);
  }));
  CUDA_OK(cudaDeviceSynchronize());
  CHECK(inside == cudaErrorNotPermitted);
}

TEST_CASE("host threads use different devices at once", "[cudart]") {
  Fresh fresh(SimSchedulerOptions{});
  std::vector<int> ok(2, 0);
  auto use = [&ok](int device) {
    if (cudaSetDevice(device) != cudaSuccess) return;
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return;
    constexpr int n = 1000;
    std::vector<unsigned char> back(n, 0);
    unsigned char* d = nullptr;
    bool right = cudaMalloc(&d, n) == cudaSuccess;
    for (int round = 0; right && round < 20; ++round) {
      const int value = device * 100 + round;
      right = cudaMemsetAsync(d, value, n, s) == cudaSuccess &&
              cudaMemcpyAsync(back.data(), d, n, cudaMemcpyDeviceToHost, s) == cudaSuccess &&
              cudaStreamSynchronize(s) == cudaSuccess && back[n - 1] == value;
    }
    int current = -1;
    cudaGetDevice(&current);
    ok[device] = right && current == device && cudaFree(d) == cudaSuccess &&
                 cudaStreamDestroy(s) == cudaSuccess;
  };
  std::thread t0(use, 0), t1(use, 1);
  t0.join();
  t1.join();
  CHECK(ok == std::vector<int>{1, 1});
}

}  // namespace
}  // namespace cudaemu_test
}  // namespace streamgrad

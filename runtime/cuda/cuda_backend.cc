// The cuda backend: real GPUs through the CUDA runtime API. Every stream, the default
// one included, is a non-blocking stream, so streams are ordered only by events, waits
// and host synchronisation, exactly as on sim. Work handed to submit() runs at once on
// the calling thread and enqueues device work on the stream's raw handle.
#include <algorithm>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/backend/backend.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_facts.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/sleep_kernel.h"

namespace streamgrad {
namespace {

// What to do about `err`, appended to every message.
const char* hint_for(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
      return "no usable NVIDIA driver or GPU; check nvidia-smi and CUDA_VISIBLE_DEVICES, "
             "or fall back to sim or cpu with try_device()";
    case cudaErrorInvalidDevice:
      return "the device index is out of range (CUDA_VISIBLE_DEVICES masks GPUs); pick "
             "devices with all_devices(DeviceType::kCuda)";
    case cudaErrorMemoryAllocation:
      return "the allocation does not fit; free tensors, call empty_cache(), or use "
             "smaller batches";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return "an earlier kernel failed and the CUDA context is unusable; restart the "
             "process and rerun with STREAMGRAD_LAUNCH_BLOCKING=1 to find the launch "
             "that caused it";
    case cudaErrorCudartUnloading:
      return "the CUDA runtime is shutting down; do not use cuda devices from static "
             "destructors or atexit handlers";
    default:
      return "errors of earlier asynchronous work can surface here; rerun with "
             "STREAMGRAD_LAUNCH_BLOCKING=1 to report them at the launch that caused them";
  }
}

// check_cuda with "op on cuda:N" as `what`; the string is built only on failure.
void check(cudaError_t err, const char* op, int device) {
  if (err == cudaSuccess) return;
  check_cuda(err, absl::StrCat(op, " on cuda:", device).c_str());
}

// Makes `index` the calling thread's CUDA device for a scope and restores the previous
// one, so that backend calls never change the device the user (or on_set_device) chose.
class DeviceSwitch {
 public:
  explicit DeviceSwitch(int index) {
    check(cudaGetDevice(&previous_), "cudaGetDevice", index);
    if (previous_ != index) {
      check(cudaSetDevice(index), "cudaSetDevice", index);
      switched_ = true;
    }
  }
  ~DeviceSwitch() {
    if (switched_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceSwitch(const DeviceSwitch&) = delete;
  DeviceSwitch& operator=(const DeviceSwitch&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

class CudaEvent final : public BackendEvent {
 public:
  CudaEvent(int device, bool timing) : device_(device) {
    DeviceSwitch on(device);
    check(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
          "cudaEventCreateWithFlags", device);
  }
  // Errors are ignored: an event may die during process teardown, after the runtime.
  ~CudaEvent() override {
    if (cudaEventDestroy(event_) != cudaSuccess) (void)cudaGetLastError();
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  int device() const { return device_; }
  cudaEvent_t get() const { return event_; }

 private:
  const int device_;
  cudaEvent_t event_ = nullptr;
};

CudaEvent& as_cuda(BackendEvent& event) { return static_cast<CudaEvent&>(event); }

class CudaBackend final : public Backend {
 public:
  // Never throws: without a driver cudaGetDeviceCount fails (35, or 100 without a GPU)
  // and the backend simply has no devices; backend_facts says why.
  CudaBackend() {
    int count = 0;
    count_error_ = cudaGetDeviceCount(&count);
    if (count_error_ != cudaSuccess) {
      (void)cudaGetLastError();
      count = 0;
    }
    count_ = std::min(std::max(count, 0), kMaxDevicesPerType);
    devices_ = std::make_unique<PerDevice[]>(static_cast<size_t>(count_));
  }
  // Streams are never destroyed: the backend is leaked at exit (runtime/backend/backend.cc) and
  // handles handed out by raw_cuda_stream must stay valid for the process's life.

  DeviceType type() const noexcept override { return DeviceType::kCuda; }
  int device_count() const noexcept override { return count_; }
  std::string device_name(int index) const override {
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties", index);
    return absl::StrCat(prop.name, " (sm_", prop.major, prop.minor, ")");
  }
  Facts backend_facts() const override { return cuda_backend_facts(count_, count_error_); }
  Facts device_facts(int index) const override { return cuda_device_facts(index); }
  void on_set_device(int index) noexcept override {
    if (cudaSetDevice(index) != cudaSuccess) (void)cudaGetLastError();
  }

  StreamId create_stream(int index, int priority) override {
    PerDevice& d = devices_[index];
    DeviceSwitch on(index);
    std::lock_guard<std::mutex> lk(d.mu);
    if (!d.range_known) {
      check(cudaDeviceGetStreamPriorityRange(&d.least, &d.greatest),
            "cudaDeviceGetStreamPriorityRange", index);
      d.range_known = true;
    }
    // CUDA counts priorities downwards: `greatest` is the most urgent and numerically
    // smallest.
    const int clamped = std::min(std::max(priority, d.greatest), d.least);
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, clamped),
          "cudaStreamCreateWithPriority (Stream::create)", index);
    d.streams.push_back(s);
    d.priorities.push_back(clamped);
    return static_cast<StreamId>(d.streams.size() - 1);
  }
  bool stream_exists(const Stream& s) const noexcept override {
    const int index = s.device().index();
    if (s.device().type() != DeviceType::kCuda || index < 0 || index >= count_ || s.id() < 0) {
      return false;
    }
    const PerDevice& d = devices_[index];
    std::lock_guard<std::mutex> lk(d.mu);
    return static_cast<size_t>(s.id()) < d.streams.size();
  }
  int stream_count(int index) const noexcept override {
    const PerDevice& d = devices_[index];
    std::lock_guard<std::mutex> lk(d.mu);
    return static_cast<int>(d.streams.size());
  }
  int stream_priority(const Stream& s) const override {
    const PerDevice& d = devices_[s.device().index()];
    std::lock_guard<std::mutex> lk(d.mu);
    return d.priorities.at(static_cast<size_t>(s.id()));
  }
  bool query_stream(const Stream& s) override {
    const cudaStream_t raw = existing(s);
    if (raw == nullptr) return true;  // a default stream never used has no work
    const cudaError_t err = cudaStreamQuery(raw);
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is an answer, not an error to report later
      return false;
    }
    check(err, "Stream::query (cudaStreamQuery)", s.device().index());
    return true;
  }
  void synchronize_stream(const Stream& s) override {
    const cudaStream_t raw = existing(s);
    if (raw == nullptr) return;
    check(cudaStreamSynchronize(raw), "Stream::synchronize (cudaStreamSynchronize)",
          s.device().index());
  }
  void synchronize_device(int index) override {
    DeviceSwitch on(index);
    check(cudaDeviceSynchronize(), "synchronize (cudaDeviceSynchronize)", index);
  }

  std::unique_ptr<BackendEvent> create_event(int index, bool timing) override {
    return std::make_unique<CudaEvent>(index, timing);
  }
  void record_event(BackendEvent& event, const Stream& s) override {
    CudaEvent& e = as_cuda(event);
    const int index = s.device().index();
    SG_CHECK(e.device() == index, DeviceError, "Event::record: the event was created on cuda:",
             e.device(), " but the stream ", s.str(), " is on cuda:", index,
             "; use one event per device");
    DeviceSwitch on(index);
    check(cudaEventRecord(e.get(), stream(index, s.id())), "Event::record (cudaEventRecord)",
          index);
  }
  // Cross-device waits are allowed: CUDA orders a stream after another device's event.
  void block_event(BackendEvent& event, const Stream& s) override {
    const int index = s.device().index();
    DeviceSwitch on(index);
    check(cudaStreamWaitEvent(stream(index, s.id()), as_cuda(event).get(), 0),
          "Event::block (cudaStreamWaitEvent)", index);
  }
  bool query_event(BackendEvent& event) override {
    CudaEvent& e = as_cuda(event);
    const cudaError_t err = cudaEventQuery(e.get());
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    check(err, "Event::query (cudaEventQuery)", e.device());
    return true;
  }
  void synchronize_event(BackendEvent& event) override {
    CudaEvent& e = as_cuda(event);
    check(cudaEventSynchronize(e.get()), "Event::synchronize (cudaEventSynchronize)",
          e.device());
  }
  double elapsed_ms(BackendEvent& start, BackendEvent& end) override {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, as_cuda(start).get(), as_cuda(end).get()),
          "Event::elapsed_ms (cudaEventElapsedTime)", as_cuda(start).device());
    return ms;
  }

  // fn enqueues kernels on raw_cuda_stream(s); launches go to the current device, so the
  // stream's device is made current while fn runs.
  void submit(const Stream& s, HostFn fn) override {
    DeviceSwitch on(s.device().index());
    fn();
  }
  void sleep(const Stream& s, double microseconds) override {
    const int index = s.device().index();
    DeviceSwitch on(index);
    launch_sleep_kernel(stream(index, s.id()), microseconds);
  }
  void copy_async(void* dst, const void* src, size_t bytes, const Stream& s) override {
    if (bytes == 0) return;
    const int index = s.device().index();
    if (count_ > 1) allow_peer_copy(device_of(src), device_of(dst));
    DeviceSwitch on(index);
    // cudaMemcpyDefault lets unified addressing tell host from device memory on each side.
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream(index, s.id())),
          "copy_async (cudaMemcpyAsync)", index);
  }
  void fill_async(void* dst, unsigned char value, size_t bytes, const Stream& s) override {
    if (bytes == 0) return;
    const int index = s.device().index();
    DeviceSwitch on(index);
    check(cudaMemsetAsync(dst, value, bytes, stream(index, s.id())),
          "fill_async (cudaMemsetAsync)", index);
  }

  // The GPU holding `p`, or -1 for host memory.
  static int device_of(const void* p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    return a.type == cudaMemoryTypeDevice ? a.device : -1;
  }

  // A copy between two GPUs goes over NVLink or PCIe directly once each may access the
  // other's memory; without that, cudaMemcpy stages it through the host (still correct).
  // Enabled once per pair, both ways, as PyTorch does on a pair's first copy; a pair that
  // cannot (no P2P between them) is remembered and left staged.
  void allow_peer_copy(int a, int b) {
    if (a < 0 || b < 0 || a == b) return;
    std::lock_guard<std::mutex> lk(peer_mu_);
    const int key = std::min(a, b) * kMaxDevicesPerType + std::max(a, b);
    if (!peer_done_.insert(key).second) return;
    int can_ab = 0, can_ba = 0;
    if (cudaDeviceCanAccessPeer(&can_ab, a, b) != cudaSuccess ||
        cudaDeviceCanAccessPeer(&can_ba, b, a) != cudaSuccess || !can_ab || !can_ba) {
      (void)cudaGetLastError();
      return;
    }
    for (const auto& [from, to] : {std::pair<int, int>{a, b}, std::pair<int, int>{b, a}}) {
      DeviceSwitch on(from);
      const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // the user enabled it: fine
      } else {
        check(err, "cudaDeviceEnablePeerAccess (a copy between GPUs)", from);
      }
    }
  }

  void* raw_alloc(int index, size_t bytes) override {
    DeviceSwitch on(index);
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // out of memory is an answer: the allocator handles it
      return nullptr;
    }
    check(err, "cudaMalloc", index);
    return p;
  }
  // cudaFree waits for the device's queued work, which is what the contract asks.
  void raw_free(int index, void* ptr) override {
    if (ptr == nullptr) return;
    DeviceSwitch on(index);
    const cudaError_t err = cudaFree(ptr);
    if (err == cudaErrorCudartUnloading) {
      (void)cudaGetLastError();  // process exit: the memory goes with the context
      return;
    }
    check(err, "cudaFree", index);
  }
  size_t total_memory(int index) const override {
    DeviceSwitch on(index);
    size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", index);
    return total_bytes;
  }
  void* pinned_alloc(size_t bytes) override {
    void* p = nullptr;
    // Portable: page-locked for every device's copies, not only the current one's.
    if (cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void pinned_free(void* ptr) noexcept override {
    if (ptr != nullptr && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
  }

  // The raw handle of stream `id` of device `index`, creating the default stream (id 0)
  // on first use. Throws DeviceError for an id the device never created.
  cudaStream_t stream(int index, StreamId id) {
    PerDevice& d = devices_[index];
    std::lock_guard<std::mutex> lk(d.mu);
    SG_CHECK(id >= 0 && static_cast<size_t>(id) < d.streams.size(), DeviceError,
             "stream cuda:", index, "/s", id,
             " does not exist; make streams with Stream::create or Stream::from_pool");
    if (d.streams[id] == nullptr) {
      // Not the legacy default stream: that one would serialise with every blocking
      // stream, and streamgrad's model has no implicitly ordered stream.
      DeviceSwitch on(index);
      check(cudaStreamCreateWithFlags(&d.streams[id], cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags (default stream)", index);
    }
    return d.streams[id];
  }

 private:
  struct PerDevice {
    mutable std::mutex mu;
    // Index = StreamId. Entry 0 is null until the default stream is first used.
    std::vector<cudaStream_t> streams{nullptr};
    std::vector<int> priorities{0};  // as cudaStreamCreateWithFlags gives
    bool range_known = false;
    int least = 0;
    int greatest = 0;
  };

  // The handle if the stream was created, null for a default stream never used.
  cudaStream_t existing(const Stream& s) const {
    const PerDevice& d = devices_[s.device().index()];
    std::lock_guard<std::mutex> lk(d.mu);
    return d.streams.at(static_cast<size_t>(s.id()));
  }

  int count_ = 0;
  cudaError_t count_error_ = cudaSuccess;
  std::mutex peer_mu_;
  std::set<int> peer_done_;  // device pairs (low * kMaxDevicesPerType + high) tried
  std::unique_ptr<PerDevice[]> devices_;
};

SG_REGISTER_BACKEND(DeviceType::kCuda, CudaBackend);

}  // namespace

cudaStream_t raw_cuda_stream(const Stream& stream) {
  SG_CHECK(stream.device().type() == DeviceType::kCuda, DeviceError, "raw_cuda_stream: ",
           stream.str(), " is not a cuda stream; only cuda streams have a cudaStream_t");
  auto& cuda = static_cast<CudaBackend&>(backend(DeviceType::kCuda));
  SG_CHECK(cuda.stream_exists(stream), DeviceError, "raw_cuda_stream: stream ", stream.str(),
           " does not exist (there ", cuda.device_count() == 1 ? "is " : "are ",
           cuda.device_count(), " cuda device", cuda.device_count() == 1 ? "" : "s",
           "); make streams with Stream::create or Stream::from_pool");
  return cuda.stream(stream.device().index(), stream.id());
}

void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  // Non-sticky errors also linger as the thread's last error, where a later
  // cudaGetLastError() after a kernel launch would blame the wrong call.
  (void)cudaGetLastError();
  throw DeviceError(absl::StrCat(what, " failed: ", cudaGetErrorName(err), " (",
                                 cudaGetErrorString(err), "); ", hint_for(err)));
}

}  // namespace streamgrad

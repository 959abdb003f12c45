// Internal to runtime/cuda: the cuda backend's class and the helpers its files share.
//
// Offers:
//   CudaBackend   the Backend of DeviceType::kCuda (registered in cuda_backend.cc).
//                 cuda_backend.cc: devices, streams, events, work; cuda_memory.cc: copies,
//                 fills, device and pinned memory, peer access between GPUs; cuda_vmm.cc:
//                 virtual memory for expandable segments, through the driver API.
//   CudaEvent     a cudaEvent_t of one device, destroyed with the object.
//   DeviceSwitch  makes a device the thread's current CUDA device for a scope.
//   check(err, op, device)   check_cuda with "<op> on cuda:<device>" (cuda_errors.cc).
//
// Every stream, the default one included, is a non-blocking stream, so streams are
// ordered only by events, waits and host synchronisation, exactly as on sim.
// Thread-safety: as Backend (every method from any thread); per-device state is under
// the device's mutex, the peer-access record under its own. Failure: DeviceError from
// check() with the CUDA error and what to do; "not ready" and out of memory are answers
// (false, nullptr), not errors.
#ifndef STREAMGRAD_RUNTIME_CUDA_CUDA_BACKEND_H_
#define STREAMGRAD_RUNTIME_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime_api.h>
#ifdef STREAMGRAD_CUDAEMU
#include "cudaemu_runtime.h"
#endif

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"

namespace streamgrad {
namespace cuda_internal {

// check_cuda with "op on cuda:N" as `what`; the string is built only on failure.
void check(cudaError_t err, const char* op, int device);

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
#ifdef STREAMGRAD_CUDAEMU
    // The observers' key for this event, handed back with each record the runtime makes.
    check(cudaemu::set_user_data(event_, reinterpret_cast<uintptr_t>(
                                             static_cast<const BackendEvent*>(this))),
          "cudaemu::set_user_data", device);
#endif
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

inline CudaEvent& as_cuda(BackendEvent& event) { return static_cast<CudaEvent&>(event); }

class CudaBackend final : public Backend {
 public:
  // Never throws: without a driver cudaGetDeviceCount fails (35, or 100 without a GPU)
  // and the backend simply has no devices; backend_facts says why.
  CudaBackend();
  // Streams are never destroyed: the backend is leaked at exit (runtime/backend/backend.cc) and
  // handles handed out by raw_cuda_stream must stay valid for the process's life.

  DeviceType type() const noexcept override { return DeviceType::kCuda; }
  int device_count() const noexcept override { return count_; }
  std::string device_name(int index) const override;
  Facts backend_facts() const override;
  Facts device_facts(int index) const override;
  void on_set_device(int index) noexcept override;

  StreamId create_stream(int index, int priority) override;
  bool stream_exists(const Stream& s) const noexcept override;
  int stream_count(int index) const noexcept override;
  int stream_priority(const Stream& s) const override;
  bool query_stream(const Stream& s) override;
  void synchronize_stream(const Stream& s) override;
  void synchronize_device(int index) override;

  std::unique_ptr<BackendEvent> create_event(int index, bool timing) override;
  void record_event(BackendEvent& event, const Stream& s) override;
  // Cross-device waits are allowed: CUDA orders a stream after another device's event.
  void block_event(BackendEvent& event, const Stream& s) override;
  bool query_event(BackendEvent& event) override;
  void synchronize_event(BackendEvent& event) override;
  double elapsed_ms(BackendEvent& start, BackendEvent& end) override;
  // On the interpreted device only: there the emulated runtime tells the observers of the
  // records and waits it performed (cuda_backend.cc, OrderingForwarder).
  bool reports_orderings() const noexcept override;

  // fn enqueues kernels on raw_cuda_stream(s); launches go to the current device, so the
  // stream's device is made current while fn runs.
  void submit(const Stream& s, HostFn fn) override;
  void sleep(const Stream& s, double microseconds) override;
  void copy_async(void* dst, const void* src, size_t bytes, const Stream& s) override;
  void fill_async(void* dst, unsigned char value, size_t bytes, const Stream& s) override;

  // The GPU holding `p`, or -1 for host memory.
  static int device_of(const void* p);
  // Lets GPUs `a` and `b` copy to each other directly, once per pair (cuda_memory.cc).
  void allow_peer_copy(int a, int b);

  void* raw_alloc(int index, size_t bytes) override;
  // cudaFree waits for the device's queued work, which is what the contract asks.
  void raw_free(int index, void* ptr) override;
  size_t total_memory(int index) const override;
  // Through the driver's virtual memory API (cuMemAddressReserve, cuMemCreate, cuMemMap,
  // cuMemSetAccess; cuda_vmm.cc), found with cudaGetDriverEntryPointByVersion so that no
  // binary links the driver. Granularity 0 (the allocator then keeps whole segments, with
  // a warning) where the driver lacks the API or the device does not support it. Each
  // granule is a handle of its own, so that any whole number of them at the end can be
  // unmapped; vm_map grants access to the device and to every device that can reach it
  // as a peer; vm_unmap waits for the device's queued work first, as cudaFree does (the
  // driver's unmap does not).
  size_t vm_granularity(int index) const override;
  void* vm_reserve(int index, size_t bytes) override;
  bool vm_map(int index, void* ptr, size_t bytes) override;
  void vm_unmap(int index, void* ptr, size_t bytes) override;
  void* pinned_alloc(size_t bytes) override;
  void pinned_free(void* ptr) noexcept override;

  // The raw handle of stream `id` of device `index`, creating the default stream (id 0)
  // on first use. Throws DeviceError for an id the device never created.
  cudaStream_t stream(int index, StreamId id);

 private:
  struct PerDevice {
    mutable std::mutex mu;
    // Index = StreamId. Entry 0 is null until the default stream is first used.
    std::vector<cudaStream_t> streams{nullptr};
    std::vector<int> priorities{0};  // as cudaStreamCreateWithFlags gives
    bool range_known = false;
    int least = 0;
    int greatest = 0;
    bool vm_known = false;
    size_t vm_granularity = 0;
    std::map<uintptr_t, unsigned long long> vm_pages;  // mapped granule -> its handle
  };

  // The handle if the stream was created, null for a default stream never used.
  cudaStream_t existing(const Stream& s) const;

  int count_ = 0;
  cudaError_t count_error_ = cudaSuccess;
  std::mutex peer_mu_;
  std::set<int> peer_done_;  // device pairs (low * kMaxDevicesPerType + high) tried
  std::unique_ptr<PerDevice[]> devices_;
};

}  // namespace cuda_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDA_CUDA_BACKEND_H_

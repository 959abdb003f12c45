// Internal to the emulated CUDA runtime (//runtime/cudaemu:cudart): the state behind the
// handles, the per-host-thread state, and the helpers the cudart_*.cc files share.
//
// Offers: CUstream_st and CUevent_st (what cudaStream_t and cudaEvent_t point to), Runtime
// (the process-wide devices, allocations, live handles and the SimExecutor that runs the
// streams), the thread's last error, and the task wrapper that turns an exception thrown
// by work on a stream into the device's sticky error.
//
// Locking: Runtime::mu guards everything but the sticky errors, which err_mu guards. Work
// running on a stream takes err_mu only, so enqueueing under mu is safe even where the
// executor runs queued work on the enqueueing thread (deterministic back-pressure). API
// functions check in_task() before taking mu: a task that called one would wait for
// itself.
// Thread-safety: Runtime's members under the locks above; the thread state is per thread.
// Failure: nothing here throws except the executor calls, which the callers catch.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_CUDART_STATE_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_CUDART_STATE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "cuda_runtime_api.h"
#include "cudaemu_runtime.h"
#include "runtime/sim/sim_executor.h"

struct CUstream_st {
  int device;
  int exec_id;    // the SimExecutor stream; 0 is the device's legacy default stream
  bool legacy;
  bool blocking;  // ordered with the legacy stream (cudaStreamDefault)
  int priority;
  // The legacy stream's tail this stream last waited for: a stream waits for each legacy
  // action once, before its first action after it.
  std::shared_ptr<streamgrad::sim_internal::Marker> legacy_seen;
  uintptr_t user_data = 0;  // cudaemu::set_user_data's
};

struct CUevent_st {
  int device;
  unsigned flags;
  std::shared_ptr<streamgrad::sim_internal::Marker> marker;  // null: never recorded
  uintptr_t user_data = 0;                                     // cudaemu::set_user_data's
};

namespace streamgrad {
namespace cudaemu {
namespace internal {

using sim_internal::Marker;
using sim_internal::SimExecutor;

constexpr int kMaxDevices = 16;
constexpr size_t kAllocAlignment = 256;  // as cudaMalloc guarantees

struct Allocation {
  size_t bytes;
  int device;  // host allocations: the device current when it was made
  bool host;
};

// Driver virtual memory (cuda.h, cuda_vmm.cc): a handle's bytes count against its device
// from cuMemCreate until it is released and unmapped; a mapping lies in a reservation.
struct VmHandle {
  size_t bytes;
  int device;
  int mappings = 0;
  bool released = false;
};
struct VmMapping {
  Allocation as_allocation;  // what find() hands back for it: device memory
  unsigned long long handle;
};

struct DeviceState {
  size_t total = 0;
  size_t used = 0;
  bool peer[kMaxDevices] = {};
  std::unique_ptr<CUstream_st> legacy;
  std::vector<CUstream_st*> blocking;                 // live blocking streams
  std::vector<std::shared_ptr<Marker>> retired;       // tails of destroyed blocking streams
  std::shared_ptr<Marker> legacy_tail;                // the last legacy action
  std::vector<int> free_ids;                          // executor streams to reuse when idle
  cudaError_t sticky = cudaSuccess;                   // under err_mu
  std::string sticky_detail;                          // under err_mu
};

class Runtime {
 public:
  static Runtime& get();

  SimExecutor& exec() { return *exec_; }

  // Under mu. Returns cudaSuccess or the error (also set as the thread's last error).
  cudaError_t check_device(int device);
  // 0 / cudaStreamLegacy: the current device's legacy stream; otherwise a live stream.
  cudaError_t resolve(cudaStream_t handle, CUstream_st** out);
  cudaError_t check_event(cudaEvent_t event);
  // Enqueues `op(device, exec_id)` on `s` with the legacy stream's implicit ordering; an
  // executor failure (no worker thread can start) becomes cudaErrorLaunchFailure.
  cudaError_t ordered(CUstream_st& s, const std::function<void(int, int)>& op);
  // Under mu: ordered() for work, guarded().
  cudaError_t enqueue(CUstream_st& s, const char* what, std::function<void()> fn);
  // The allocation containing [p, p + bytes), or null when p is in none; *bad is set when
  // p is inside one but the range runs past its end. Mappings next to each other count as
  // one allocation, as addresses a kernel may run across.
  const Allocation* find(const void* p, size_t bytes, bool* bad, uintptr_t* base);
  void reset();  // under mu

  // Under err_mu (taken here).
  cudaError_t sticky(int device, std::string* detail);
  void record_fault(int device, const std::string& what, const std::string& message);

  std::mutex mu;
  std::mutex err_mu;
  int device_count = 0;
  cudaError_t init_error = cudaSuccess;
  std::string init_detail;
  std::vector<std::unique_ptr<DeviceState>> devices;  // at least device_count
  std::unordered_set<CUstream_st*> streams;           // live streams made by the API
  std::unordered_set<CUevent_st*> events;
  std::map<uintptr_t, Allocation> allocations;
  std::map<uintptr_t, size_t> reservations;  // cuMemAddressReserve's: start -> bytes
  std::map<unsigned long long, VmHandle> vm_handles;
  unsigned long long next_vm_handle = 1;
  std::map<uintptr_t, VmMapping> mappings;  // cuMemMap's: start -> mapping
  bool unloading = false;  // set at exit: cudaFree / cudaFreeHost answer cudaErrorCudartUnloading

 private:
  Runtime();
  void ordered_unchecked(CUstream_st& s, const std::function<void(int, int)>& op);
  void configure();  // reads the environment, adds executor devices
  std::unique_ptr<SimExecutor> exec_;
};

// set_ordering_listener's listener, or null.
cudaemu::OrderingListener* ordering_listener();

// The calling thread's state.
int& current_device();
bool in_task();
cudaError_t last_error();
void clear_last_error();
// Sets the thread's last error and its detail; returns err.
cudaError_t fail(cudaError_t err, std::string detail);
// fail() with cudaErrorNotPermitted when called from inside a task.
bool refuse_in_task(const char* api, cudaError_t* err);
// The device's sticky error, set as the thread's last error when there is one.
cudaError_t sticky_of(int device);
// Wraps work for a stream: skipped once the device has a sticky error; an exception it
// throws becomes the device's sticky error, `what` naming the work.
std::function<void()> guarded(int device, std::string what, std::function<void()> fn);

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_CUDART_STATE_H_

// The emulated CUDA runtime's shared state (cudart_state.h) and the entry points of
// include/cudaemu_runtime.h: configuration from the environment, handle resolution, the
// legacy default stream's implicit ordering, sticky errors and the test reset.
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cudaemu_runtime.h"
#include "runtime/backend/config.h"
#include "runtime/base/error.h"
#include "runtime/cudaemu/cudart_state.h"

namespace streamgrad {
namespace cudaemu {
namespace internal {
namespace {

constexpr int kDefaultDevices = 2;
constexpr uint64_t kDefaultMemoryBytes = uint64_t{4} << 30;

thread_local int t_device = 0;
thread_local bool t_in_task = false;
thread_local cudaError_t t_last = cudaSuccess;
thread_local std::string t_detail;

// A whole non-negative decimal number, or false.
bool parse_count(const char* text, uint64_t* out) {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

SimSchedulerOptions options_from_config(std::string* problem) {
  try {
    return sim_internal::options_from_config();
  } catch (const Error& e) {
    *problem = e.what();
    return SimSchedulerOptions{};
  }
}

sim_internal::SimLimits limits_from_config() {
  try {
    return {static_cast<size_t>(config().sim_queue_depth), config().sim_workers};
  } catch (const Error&) {  // reported through options_from_config
    return {static_cast<size_t>(kSimDefaultQueueDepth), kSimDefaultWorkers};
  }
}

// Faults that are bad memory accesses on a GPU; every other failure of device work is a
// launch failure.
cudaError_t classify(const std::string& message) {
  if (message.find("of shared array") != std::string::npos ||
      message.find("is outside [0,") != std::string::npos ||
      message.find("out of bounds") != std::string::npos) {
    return cudaErrorIllegalAddress;
  }
  return cudaErrorLaunchFailure;
}

}  // namespace

Runtime& Runtime::get() {
  static Runtime* runtime = new Runtime();  // never destroyed: workers may outlive exit
  return *runtime;
}

Runtime::Runtime() {
  std::string problem;
  const SimSchedulerOptions options = options_from_config(&problem);
  exec_ = std::make_unique<SimExecutor>(options, limits_from_config());
  configure();
  if (!problem.empty() && init_error == cudaSuccess) {
    init_error = cudaErrorInvalidValue;
    init_detail = absl::StrCat("the emulated CUDA devices' scheduler settings "
                               "(STREAMGRAD_SIM_SCHEDULER, _POLICY, _SEED, _JITTER_US, "
                               "_PCT_DEPTH, _PCT_STEPS, _QUEUE_DEPTH, _WORKERS) are malformed: ",
                               problem);
    device_count = 0;
  }
  std::atexit([] {
    Runtime& rt = get();
    std::lock_guard<std::mutex> lk(rt.mu);
    rt.unloading = true;
  });
}

void Runtime::configure() {
  init_error = cudaSuccess;
  init_detail.clear();
  uint64_t count = kDefaultDevices;
  uint64_t memory = kDefaultMemoryBytes;
  const char* devices_env = std::getenv("STREAMGRAD_CUDAEMU_DEVICES");
  const char* memory_env = std::getenv("STREAMGRAD_CUDAEMU_MEMORY_BYTES");
  if (devices_env != nullptr && (!parse_count(devices_env, &count) || count > kMaxDevices)) {
    init_error = cudaErrorInvalidValue;
    init_detail = absl::StrCat("STREAMGRAD_CUDAEMU_DEVICES='", devices_env,
                               "' is not a device count in 0..", kMaxDevices);
    count = 0;
  }
  if (memory_env != nullptr && (!parse_count(memory_env, &memory) || memory == 0)) {
    init_error = cudaErrorInvalidValue;
    init_detail = absl::StrCat("STREAMGRAD_CUDAEMU_MEMORY_BYTES='", memory_env,
                               "' is not a positive number of bytes");
    count = 0;
  }
  device_count = static_cast<int>(count);
  while (static_cast<int>(devices.size()) < device_count) {
    const int d = exec_->add_device();
    auto state = std::make_unique<DeviceState>();
    state->legacy.reset(new CUstream_st{d, 0, true, false, 0, nullptr});
    std::lock_guard<std::mutex> lk(err_mu);  // sticky() reads the list under err_mu only
    devices.push_back(std::move(state));
  }
  for (auto& dev : devices) {
    dev->total = static_cast<size_t>(memory);
    dev->used = 0;
    for (bool& p : dev->peer) p = false;
    dev->blocking.clear();
    dev->retired.clear();
    dev->legacy_tail = nullptr;
    std::lock_guard<std::mutex> lk(err_mu);
    dev->sticky = cudaSuccess;
    dev->sticky_detail.clear();
  }
}

void Runtime::reset() {
  exec_->synchronize_all();
  for (CUstream_st* s : streams) {
    devices[s->device]->free_ids.push_back(s->exec_id);
    delete s;
  }
  streams.clear();
  for (CUevent_st* e : events) delete e;
  events.clear();
  for (auto& [base, a] : allocations) std::free(reinterpret_cast<void*>(base));
  allocations.clear();
  for (auto& [base, bytes] : reservations) munmap(reinterpret_cast<void*>(base), bytes);
  reservations.clear();
  mappings.clear();
  vm_handles.clear();
  configure();
}

cudaError_t Runtime::check_device(int device) {
  if (init_error != cudaSuccess) return fail(init_error, init_detail);
  if (device_count == 0) return fail(cudaErrorNoDevice, "no emulated CUDA device "
                                     "(STREAMGRAD_CUDAEMU_DEVICES=0)");
  if (device < 0 || device >= device_count) {
    return fail(cudaErrorInvalidDevice, absl::StrCat("device ", device, " does not exist; ",
                                                     device_count, " emulated devices"));
  }
  return cudaSuccess;
}

cudaError_t Runtime::resolve(cudaStream_t handle, CUstream_st** out) {
  if (handle == nullptr || handle == cudaStreamLegacy) {
    const cudaError_t err = check_device(current_device());
    if (err != cudaSuccess) return err;
    *out = devices[current_device()]->legacy.get();
    return cudaSuccess;
  }
  if (streams.count(handle) == 0) {
    return fail(cudaErrorInvalidResourceHandle,
                "the stream handle is not a live stream (destroyed, or from before a reset)");
  }
  *out = handle;
  return cudaSuccess;
}

cudaError_t Runtime::check_event(cudaEvent_t event) {
  if (event == nullptr || events.count(event) == 0) {
    return fail(cudaErrorInvalidResourceHandle,
                "the event handle is not a live event (destroyed, or from before a reset)");
  }
  return cudaSuccess;
}

cudaError_t Runtime::ordered(CUstream_st& s, const std::function<void(int, int)>& op) {
  try {
    ordered_unchecked(s, op);
  } catch (const std::exception& e) {
    return fail(cudaErrorLaunchFailure, e.what());
  }
  return cudaSuccess;
}

void Runtime::ordered_unchecked(CUstream_st& s, const std::function<void(int, int)>& op) {
  DeviceState& dev = *devices[s.device];
  const int d = s.device;
  if (s.legacy) {
    // An action on the legacy stream first waits for every blocking stream's work...
    for (CUstream_st* b : dev.blocking) {
      if (exec_->query_stream(d, b->exec_id)) continue;  // nothing of it in flight
      exec_->enqueue_wait(d, 0, exec_->enqueue_record(d, b->exec_id));
    }
    for (auto& m : dev.retired) exec_->enqueue_wait(d, 0, m);
    dev.retired.clear();
    op(d, 0);
    // ...and the blocking streams' later actions wait for it (at their next enqueue).
    dev.legacy_tail = exec_->enqueue_record(d, 0);
    return;
  }
  if (s.blocking && dev.legacy_tail != nullptr && s.legacy_seen != dev.legacy_tail) {
    exec_->enqueue_wait(d, s.exec_id, dev.legacy_tail);
    s.legacy_seen = dev.legacy_tail;
  }
  op(d, s.exec_id);
}

cudaError_t Runtime::enqueue(CUstream_st& s, const char* what, std::function<void()> fn) {
  std::function<void()> task = guarded(s.device, what, std::move(fn));
  return ordered(s, [&](int d, int id) { exec_->enqueue_work(d, id, std::move(task)); });
}

const Allocation* Runtime::find(const void* p, size_t bytes, bool* bad, uintptr_t* base) {
  *bad = false;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(at);
  if (it != allocations.begin() && at < std::prev(it)->first + std::prev(it)->second.bytes) {
    --it;
    *bad = bytes > it->first + it->second.bytes - at;
    *base = it->first;
    return &it->second;
  }
  auto m = mappings.upper_bound(at);
  if (m == mappings.begin()) return nullptr;
  --m;
  if (at >= m->first + m->second.as_allocation.bytes) return nullptr;
  *base = m->first;
  const Allocation* found = &m->second.as_allocation;
  uintptr_t end = m->first + m->second.as_allocation.bytes;
  for (++m; m != mappings.end() && m->first == end; ++m) end += m->second.as_allocation.bytes;
  *bad = bytes > end - at;
  return found;
}

cudaError_t Runtime::sticky(int device, std::string* detail) {
  std::lock_guard<std::mutex> lk(err_mu);
  if (device < 0 || device >= static_cast<int>(devices.size())) return cudaSuccess;
  if (detail != nullptr) *detail = devices[device]->sticky_detail;
  return devices[device]->sticky;
}

void Runtime::record_fault(int device, const std::string& what, const std::string& message) {
  std::lock_guard<std::mutex> lk(err_mu);
  DeviceState& dev = *devices[device];
  if (dev.sticky != cudaSuccess) return;  // the first fault is the one to report
  dev.sticky = classify(message);
  dev.sticky_detail = absl::StrCat(what, " on emulated CUDA device ", device, ": ", message);
}

int& current_device() { return t_device; }
bool in_task() { return t_in_task; }

cudaError_t fail(cudaError_t err, std::string detail) {
  t_last = err;
  t_detail = std::move(detail);
  return err;
}

bool refuse_in_task(const char* api, cudaError_t* err) {
  if (!t_in_task) return false;
  *err = fail(cudaErrorNotPermitted,
              absl::StrCat(api, " called from work running on a stream; CUDA API calls are "
                                "not permitted there"));
  return true;
}

cudaError_t sticky_of(int device) {
  std::string detail;
  const cudaError_t err = Runtime::get().sticky(device, &detail);
  return err == cudaSuccess ? err : fail(err, std::move(detail));
}

std::function<void()> guarded(int device, std::string what, std::function<void()> fn) {
  return [device, what = std::move(what), fn = std::move(fn)] {
    Runtime& rt = Runtime::get();
    if (rt.sticky(device, nullptr) != cudaSuccess) return;  // the context is unusable
    const bool was_in_task = t_in_task;
    t_in_task = true;
    try {
      fn();
    } catch (const std::exception& e) {
      rt.record_fault(device, what, e.what());
    } catch (...) {
      rt.record_fault(device, what, "an exception that is not a std::exception");
    }
    t_in_task = was_in_task;
  };
}

cudaError_t last_error() { return t_last; }
void clear_last_error() { t_last = cudaSuccess; }

}  // namespace internal

using internal::Runtime;

cudaError_t enqueue_on_stream(cudaStream_t stream, const char* what, std::function<void()> fn) {
  cudaError_t err;
  if (internal::refuse_in_task("enqueue_on_stream", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  CUstream_st* s = nullptr;
  if ((err = rt.resolve(stream, &s)) != cudaSuccess) return err;
  if ((err = internal::sticky_of(s->device)) != cudaSuccess) return err;
  return rt.enqueue(*s, what, std::move(fn));
}

void set_last_error(cudaError_t err, std::string detail) { internal::fail(err, std::move(detail)); }
std::string last_error_detail() { return internal::t_detail; }

void set_scheduler(const SimSchedulerOptions& options) {
  Runtime::get().exec().set_options(options);
}
SimSchedulerOptions scheduler() { return Runtime::get().exec().options(); }
bool step() { return Runtime::get().exec().step(); }

void reset_for_testing() {
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  rt.reset();
  internal::current_device() = 0;
  internal::clear_last_error();
}

}  // namespace cudaemu
}  // namespace streamgrad

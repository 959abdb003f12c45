// The cuda backend (runtime/cuda/cuda_backend.h): real GPUs through the CUDA runtime API.
// This file holds devices, streams, events and work; cuda_memory.cc holds copies and
// memory, cuda_errors.cc turns CUDA errors into exceptions. Work handed to submit() runs
// at once on the calling thread and enqueues device work on the stream's raw handle.
#include "runtime/cuda/cuda_backend.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/backend/observer.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_facts.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/sleep_kernel.h"

namespace streamgrad {
namespace cuda_internal {
namespace {

#ifdef STREAMGRAD_CUDAEMU
// The interpreted device's runtime reports each record and wait it performed; this passes
// those made for Event and the allocator (inside a detail::OrderingReport) to the launch
// observers in their terms: the event's BackendEvent (the event's user data) and the
// streamgrad stream (user data: its id + 1). Events and streams the backend did not make
// carry no user data and are not reported; nor are an observer's own events.
class OrderingForwarder final : public cudaemu::OrderingListener {
 public:
  void on_record(uintptr_t event_data, uintptr_t stream_data, int device) override {
    if (!wanted(event_data, stream_data)) return;
    const void* key = reinterpret_cast<const void*>(event_data);
    const Stream s = stream_of(stream_data, device);
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_record(key, s); });
  }
  void on_wait(uintptr_t stream_data, int device, uintptr_t event_data) override {
    if (!wanted(event_data, stream_data)) return;
    const void* key = reinterpret_cast<const void*>(event_data);
    const Stream s = stream_of(stream_data, device);
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_block(key, s); });
  }

 private:
  static bool wanted(uintptr_t event_data, uintptr_t stream_data) {
    return event_data != 0 && stream_data != 0 && detail::in_ordering_report() &&
           detail::have_observers();
  }
  static Stream stream_of(uintptr_t stream_data, int device) {
    return Stream::unchecked(Device(DeviceType::kCuda, device),
                             static_cast<StreamId>(stream_data - 1));
  }
};
#endif

// Lets the interpreted runtime name a stream it reports to OrderingForwarder.
void tag_stream(cudaStream_t s, StreamId id, int index) {
#ifdef STREAMGRAD_CUDAEMU
  check(cudaemu::set_user_data(s, static_cast<uintptr_t>(id) + 1), "cudaemu::set_user_data",
        index);
#else
  (void)s, (void)id, (void)index;
#endif
}

}  // namespace

CudaBackend::CudaBackend() {
#ifdef STREAMGRAD_CUDAEMU
  // Leaked, as the backend is: static destructors may still record and wait at exit.
  static auto* const forwarder = new OrderingForwarder;
  cudaemu::set_ordering_listener(forwarder);
#endif
  int count = 0;
  count_error_ = cudaGetDeviceCount(&count);
  if (count_error_ != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  count_ = std::min(std::max(count, 0), kMaxDevicesPerType);
  devices_ = std::make_unique<PerDevice[]>(static_cast<size_t>(count_));
}

std::string CudaBackend::device_name(int index) const {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties", index);
  return absl::StrCat(prop.name, " (sm_", prop.major, prop.minor, ")");
}

Facts CudaBackend::backend_facts() const { return cuda_backend_facts(count_, count_error_); }

Facts CudaBackend::device_facts(int index) const { return cuda_device_facts(index); }

void CudaBackend::on_set_device(int index) noexcept {
  if (cudaSetDevice(index) != cudaSuccess) (void)cudaGetLastError();
}

StreamId CudaBackend::create_stream(int index, int priority) {
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
  const auto id = static_cast<StreamId>(d.streams.size());
  tag_stream(s, id, index);
  d.streams.push_back(s);
  d.priorities.push_back(clamped);
  return id;
}

bool CudaBackend::stream_exists(const Stream& s) const noexcept {
  const int index = s.device().index();
  if (s.device().type() != DeviceType::kCuda || index < 0 || index >= count_ || s.id() < 0) {
    return false;
  }
  const PerDevice& d = devices_[index];
  std::lock_guard<std::mutex> lk(d.mu);
  return static_cast<size_t>(s.id()) < d.streams.size();
}

int CudaBackend::stream_count(int index) const noexcept {
  const PerDevice& d = devices_[index];
  std::lock_guard<std::mutex> lk(d.mu);
  return static_cast<int>(d.streams.size());
}

int CudaBackend::stream_priority(const Stream& s) const {
  const PerDevice& d = devices_[s.device().index()];
  std::lock_guard<std::mutex> lk(d.mu);
  return d.priorities.at(static_cast<size_t>(s.id()));
}

bool CudaBackend::query_stream(const Stream& s) {
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

void CudaBackend::synchronize_stream(const Stream& s) {
  const cudaStream_t raw = existing(s);
  if (raw == nullptr) return;
  check(cudaStreamSynchronize(raw), "Stream::synchronize (cudaStreamSynchronize)",
        s.device().index());
}

void CudaBackend::synchronize_device(int index) {
  DeviceSwitch on(index);
  check(cudaDeviceSynchronize(), "synchronize (cudaDeviceSynchronize)", index);
}

std::unique_ptr<BackendEvent> CudaBackend::create_event(int index, bool timing) {
  return std::make_unique<CudaEvent>(index, timing);
}

void CudaBackend::record_event(BackendEvent& event, const Stream& s) {
  CudaEvent& e = as_cuda(event);
  const int index = s.device().index();
  SG_CHECK(e.device() == index, DeviceError, "Event::record: the event was created on cuda:",
           e.device(), " but the stream ", s.str(), " is on cuda:", index,
           "; use one event per device");
  DeviceSwitch on(index);
  check(cudaEventRecord(e.get(), stream(index, s.id())), "Event::record (cudaEventRecord)",
        index);
}

void CudaBackend::block_event(BackendEvent& event, const Stream& s) {
  const int index = s.device().index();
  DeviceSwitch on(index);
  check(cudaStreamWaitEvent(stream(index, s.id()), as_cuda(event).get(), 0),
        "Event::block (cudaStreamWaitEvent)", index);
}

bool CudaBackend::reports_orderings() const noexcept {
#ifdef STREAMGRAD_CUDAEMU
  return true;
#else
  return false;
#endif
}

bool CudaBackend::query_event(BackendEvent& event) {
  CudaEvent& e = as_cuda(event);
  const cudaError_t err = cudaEventQuery(e.get());
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check(err, "Event::query (cudaEventQuery)", e.device());
  return true;
}

void CudaBackend::synchronize_event(BackendEvent& event) {
  CudaEvent& e = as_cuda(event);
  check(cudaEventSynchronize(e.get()), "Event::synchronize (cudaEventSynchronize)",
        e.device());
}

double CudaBackend::elapsed_ms(BackendEvent& start, BackendEvent& end) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, as_cuda(start).get(), as_cuda(end).get()),
        "Event::elapsed_ms (cudaEventElapsedTime)", as_cuda(start).device());
  return ms;
}

void CudaBackend::submit(const Stream& s, HostFn fn) {
  DeviceSwitch on(s.device().index());
  fn();
}

void CudaBackend::sleep(const Stream& s, double microseconds) {
  const int index = s.device().index();
  DeviceSwitch on(index);
  launch_sleep_kernel(stream(index, s.id()), microseconds);
}

cudaStream_t CudaBackend::stream(int index, StreamId id) {
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
    tag_stream(d.streams[id], id, index);
  }
  return d.streams[id];
}

cudaStream_t CudaBackend::existing(const Stream& s) const {
  const PerDevice& d = devices_[s.device().index()];
  std::lock_guard<std::mutex> lk(d.mu);
  return d.streams.at(static_cast<size_t>(s.id()));
}

SG_REGISTER_BACKEND(DeviceType::kCuda, CudaBackend);

}  // namespace cuda_internal

cudaStream_t raw_cuda_stream(const Stream& stream) {
  SG_CHECK(stream.device().type() == DeviceType::kCuda, DeviceError, "raw_cuda_stream: ",
           stream.str(), " is not a cuda stream; only cuda streams have a cudaStream_t");
  auto& cuda = static_cast<cuda_internal::CudaBackend&>(backend(DeviceType::kCuda));
  SG_CHECK(cuda.stream_exists(stream), DeviceError, "raw_cuda_stream: stream ", stream.str(),
           " does not exist (there ", cuda.device_count() == 1 ? "is " : "are ",
           cuda.device_count(), " cuda device", cuda.device_count() == 1 ? "" : "s",
           "); make streams with Stream::create or Stream::from_pool");
  return cuda.stream(stream.device().index(), stream.id());
}

}  // namespace streamgrad

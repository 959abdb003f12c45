// The emulated CUDA runtime's streams and events (cuda_runtime_api.h): each stream is a
// SimExecutor stream, so streams run asynchronously and unordered with each other under
// the threaded scheduler and in a policy's order under the deterministic one; an event is
// an executor marker. The legacy default stream's implicit ordering is Runtime::ordered's.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/cudaemu/cudart_state.h"

namespace {

using streamgrad::cudaemu::OrderingListener;
using streamgrad::cudaemu::internal::fail;
using streamgrad::cudaemu::internal::Marker;
using streamgrad::cudaemu::internal::Runtime;
namespace internal = streamgrad::cudaemu::internal;

constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

// What the ordering listener is told, read under mu and told after it.
struct Ordering {
  uintptr_t event_data = 0;
  uintptr_t stream_data = 0;
  int device = 0;
};

std::atomic<OrderingListener*> g_listener{nullptr};

// Where a host wait finds a stream: its device and executor stream, read under mu.
struct Place {
  int device;
  int exec_id;
};

cudaError_t locate(cudaStream_t stream, Place* place) {
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  CUstream_st* s = nullptr;
  const cudaError_t err = rt.resolve(stream, &s);
  if (err != cudaSuccess) return err;
  *place = {s->device, s->exec_id};
  return internal::sticky_of(s->device);
}

}  // namespace

extern "C" {

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags,
                                         int priority) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaStreamCreateWithPriority", &err)) return err;
  if (pStream == nullptr || (flags & ~unsigned{cudaStreamNonBlocking}) != 0) {
    return fail(cudaErrorInvalidValue, "cudaStreamCreate: pStream is null or flags are unknown");
  }
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  const int device = internal::current_device();
  if ((err = rt.check_device(device)) != cudaSuccess) return err;
  if ((err = internal::sticky_of(device)) != cudaSuccess) return err;
  // CUDA clamps a priority outside the device's range into it.
  const int clamped = std::min(std::max(priority, kGreatestPriority), kLeastPriority);
  auto& dev = *rt.devices[device];
  int id = -1;
  // A destroyed stream's executor queue is reused once it is idle, so that a program that
  // makes and destroys streams in a loop does not grow the scheduler's stream list.
  for (auto it = dev.free_ids.begin(); it != dev.free_ids.end(); ++it) {
    if (rt.exec().query_stream(device, *it)) {
      id = *it;
      dev.free_ids.erase(it);
      break;
    }
  }
  if (id < 0) id = rt.exec().create_stream(device, clamped);
  auto* s = new CUstream_st{device, id, false, flags == cudaStreamDefault, clamped, nullptr};
  rt.streams.insert(s);
  if (s->blocking) dev.blocking.push_back(s);
  *pStream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  return cudaStreamCreateWithPriority(pStream, flags, kLeastPriority);
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  return cudaStreamCreateWithPriority(pStream, cudaStreamDefault, kLeastPriority);
}

// Returns at once; work still queued runs to completion, and the legacy stream still
// waits for it when the stream was blocking.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaStreamDestroy", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if (stream == nullptr || stream == cudaStreamLegacy || rt.streams.count(stream) == 0) {
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamDestroy: not a live stream created by cudaStreamCreate*");
  }
  auto& dev = *rt.devices[stream->device];
  if (stream->blocking) {
    dev.blocking.erase(std::find(dev.blocking.begin(), dev.blocking.end(), stream));
    dev.retired.erase(std::remove_if(dev.retired.begin(), dev.retired.end(),
                                     [&](const std::shared_ptr<Marker>& m) {
                                       return rt.exec().query_marker(*m);
                                     }),
                      dev.retired.end());
    if (!rt.exec().query_stream(stream->device, stream->exec_id)) {
      dev.retired.push_back(rt.exec().enqueue_record(stream->device, stream->exec_id));
    }
  }
  dev.free_ids.push_back(stream->exec_id);
  rt.streams.erase(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaStreamQuery", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  CUstream_st* s = nullptr;
  if ((err = rt.resolve(stream, &s)) != cudaSuccess) return err;
  const bool idle = rt.exec().query_stream(s->device, s->exec_id);
  if ((err = internal::sticky_of(s->device)) != cudaSuccess) return err;
  return idle ? cudaSuccess : fail(cudaErrorNotReady, "the stream has work queued");
}

// The legacy stream is a blocking one: ordered with every blocking stream.
cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  if (flags == nullptr) return fail(cudaErrorInvalidValue, "cudaStreamGetFlags: flags is null");
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  CUstream_st* s = nullptr;
  const cudaError_t err = rt.resolve(stream, &s);
  if (err != cudaSuccess) return err;
  const bool legacy = stream == nullptr || stream == cudaStreamLegacy;
  *flags = legacy || s->blocking ? cudaStreamDefault : cudaStreamNonBlocking;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaStreamSynchronize", &err)) return err;
  Place at{};
  if ((err = locate(stream, &at)) != cudaSuccess) return err;
  try {
    Runtime::get().exec().synchronize_stream(at.device, at.exec_id);
  } catch (const std::exception& e) {
    return fail(cudaErrorUnknown, absl::StrCat("cudaStreamSynchronize: ", e.what()));
  }
  return internal::sticky_of(at.device);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaStreamWaitEvent", &err)) return err;
  if (flags != 0) return fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: flags must be 0");
  Runtime& rt = Runtime::get();
  Ordering told;
  {
    std::lock_guard<std::mutex> lk(rt.mu);
    CUstream_st* s = nullptr;
    if ((err = rt.resolve(stream, &s)) != cudaSuccess) return err;
    if ((err = rt.check_event(event)) != cudaSuccess) return err;
    if ((err = internal::sticky_of(s->device)) != cudaSuccess) return err;
    // An event never recorded is complete: there is nothing to wait for.
    if (event->marker == nullptr) return cudaSuccess;
    std::shared_ptr<Marker> marker = event->marker;  // a later record must not change it
    err = rt.ordered(*s, [&](int d, int id) { rt.exec().enqueue_wait(d, id, marker); });
    if (err != cudaSuccess) return err;
    told = Ordering{event->user_data, s->user_data, s->device};
  }
  if (OrderingListener* l = internal::ordering_listener()) {
    l->on_wait(told.stream_data, told.device, told.event_data);
  }
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaEventCreateWithFlags", &err)) return err;
  constexpr unsigned kKnown = cudaEventBlockingSync | cudaEventDisableTiming;
  if (event == nullptr || (flags & ~kKnown) != 0) {
    return fail(cudaErrorInvalidValue, "cudaEventCreate: event is null or flags are unknown");
  }
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  const int device = internal::current_device();
  if ((err = rt.check_device(device)) != cudaSuccess) return err;
  if ((err = internal::sticky_of(device)) != cudaSuccess) return err;
  auto* e = new CUevent_st{device, flags, nullptr};
  rt.events.insert(e);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

// Captures the stream's work so far; a new record replaces the previous one for later
// queries, synchronizes and waits (waits already enqueued keep theirs).
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaEventRecord", &err)) return err;
  Runtime& rt = Runtime::get();
  std::unique_lock<std::mutex> lk(rt.mu);
  CUstream_st* s = nullptr;
  if ((err = rt.check_event(event)) != cudaSuccess) return err;
  if ((err = rt.resolve(stream, &s)) != cudaSuccess) return err;
  if (s->device != event->device) {
    return fail(cudaErrorInvalidResourceHandle,
                absl::StrCat("cudaEventRecord: the event belongs to device ", event->device,
                             " and the stream to device ", s->device));
  }
  if ((err = internal::sticky_of(s->device)) != cudaSuccess) return err;
  err = rt.ordered(*s, [&](int d, int id) { event->marker = rt.exec().enqueue_record(d, id); });
  if (err != cudaSuccess) return err;
  const Ordering told{event->user_data, s->user_data, s->device};
  lk.unlock();
  if (OrderingListener* l = internal::ordering_listener()) {
    l->on_record(told.event_data, told.stream_data, told.device);
  }
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaEventQuery", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if ((err = rt.check_event(event)) != cudaSuccess) return err;
  const bool done = event->marker == nullptr || rt.exec().query_marker(*event->marker);
  if ((err = internal::sticky_of(event->device)) != cudaSuccess) return err;
  return done ? cudaSuccess : fail(cudaErrorNotReady, "the event's work has not completed");
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaEventSynchronize", &err)) return err;
  Runtime& rt = Runtime::get();
  std::shared_ptr<Marker> marker;
  int device = 0;
  {
    std::lock_guard<std::mutex> lk(rt.mu);
    if ((err = rt.check_event(event)) != cudaSuccess) return err;
    marker = event->marker;
    device = event->device;
  }
  if (marker != nullptr) {
    try {
      rt.exec().synchronize_marker(*marker);
    } catch (const std::exception& e) {
      return fail(cudaErrorUnknown, absl::StrCat("cudaEventSynchronize: ", e.what()));
    }
  }
  return internal::sticky_of(device);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaEventElapsedTime", &err)) return err;
  if (ms == nullptr) return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is null");
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if ((err = rt.check_event(start)) != cudaSuccess || (err = rt.check_event(end)) != cudaSuccess) {
    return err;
  }
  if (((start->flags | end->flags) & cudaEventDisableTiming) != 0) {
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: an event was created with cudaEventDisableTiming");
  }
  if (start->marker == nullptr || end->marker == nullptr) {
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: an event was never recorded");
  }
  if ((err = internal::sticky_of(start->device)) != cudaSuccess) return err;
  if (!rt.exec().query_marker(*start->marker) || !rt.exec().query_marker(*end->marker)) {
    return fail(cudaErrorNotReady, "cudaEventElapsedTime: an event has not completed");
  }
  *ms = static_cast<float>(rt.exec().elapsed_ms(*start->marker, *end->marker));
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  cudaError_t err;
  if (internal::refuse_in_task("cudaEventDestroy", &err)) return err;
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  if ((err = rt.check_event(event)) != cudaSuccess) return err;
  rt.events.erase(event);
  delete event;
  return cudaSuccess;
}

}  // extern "C"

namespace streamgrad {
namespace cudaemu {

namespace internal {
OrderingListener* ordering_listener() { return g_listener.load(std::memory_order_acquire); }
}  // namespace internal

cudaError_t set_user_data(cudaStream_t stream, uintptr_t value) {
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  CUstream_st* s = nullptr;
  const cudaError_t err = rt.resolve(stream, &s);
  if (err != cudaSuccess) return err;
  if (s->legacy) {
    return fail(cudaErrorInvalidResourceHandle,
                "cudaemu::set_user_data: the legacy default stream takes no user data");
  }
  s->user_data = value;
  return cudaSuccess;
}

cudaError_t set_user_data(cudaEvent_t event, uintptr_t value) {
  Runtime& rt = Runtime::get();
  std::lock_guard<std::mutex> lk(rt.mu);
  const cudaError_t err = rt.check_event(event);
  if (err != cudaSuccess) return err;
  event->user_data = value;
  return cudaSuccess;
}

void set_ordering_listener(OrderingListener* listener) {
  g_listener.store(listener, std::memory_order_release);
}

}  // namespace cudaemu
}  // namespace streamgrad

// Backend: the interface every device type implements, and the registry that finds them.
//
// Offers:
//   Backend        abstract class; one `final` implementation per DeviceType (cpu/, sim/,
//                  cuda/). Every capability is pure virtual: a backend that lacks one does
//                  not compile. tests/runtime/backend_conformance_test.cc runs one suite
//                  against every backend present.
//   BackendEvent   a backend's event object, owned through std::unique_ptr.
//   HostFn         a unit of work handed to Backend::submit.
//   backend(type)  the registered backend (throws DeviceError if absent);
//   find_backend(type)  the same or nullptr.
//   SG_REGISTER_BACKEND(Type)  registers a lazily constructed backend at static-init time.
//
// Users and ops do not call backends directly: they use Stream, Event, launch(), copies
// and the allocator, which validate their arguments and then dispatch here. Backend
// methods may therefore assume a valid device index and a stream of that backend's type.
//
// Thread-safety: every method may be called from any thread concurrently.
// Failure: methods throw streamgrad::Error subclasses; noexcept methods never fail.
#ifndef STREAMGRAD_RUNTIME_BACKEND_BACKEND_H_
#define STREAMGRAD_RUNTIME_BACKEND_BACKEND_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/stream.h"
#include "runtime/base/device.h"

namespace streamgrad {

// Work submitted to a stream. On host-executed backends (cpu, sim) it runs in stream
// order; on cuda it runs at once on the calling thread and enqueues device work on the
// stream's raw handle (see runtime/cuda/cuda_stream.h).
using HostFn = std::function<void()>;

// (label, value) pairs in display order, for tools/devices: what users otherwise read
// from nvidia-smi or lscpu ("compute capability" -> "9.0").
using Facts = std::vector<std::pair<std::string, std::string>>;

class BackendEvent {
 public:
  virtual ~BackendEvent() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceType type() const noexcept = 0;
  // Visible devices (after STREAMGRAD_VISIBLE_DEVICES masking). Never throws: a missing
  // driver reports 0.
  virtual int device_count() const noexcept = 0;
  // A human-readable name for device `index` ("simulated accelerator (physical 1)").
  virtual std::string device_name(int index) const = 0;
  // Facts about the backend as a whole (cuda: runtime and driver versions, and why there
  // are no devices when there are none) and about device `index`. Never throw: a fact
  // that cannot be read says why in its value.
  virtual Facts backend_facts() const = 0;
  virtual Facts device_facts(int index) const = 0;
  // Called when `index` becomes the thread's current device of this type (cuda sets the
  // runtime's current device); never fails.
  virtual void on_set_device(int index) noexcept = 0;

  // Streams. Id 0 is each device's default stream and always exists.
  virtual StreamId create_stream(int index, int priority) = 0;
  virtual bool stream_exists(const Stream& stream) const noexcept = 0;
  // Streams created so far on device `index`, the default stream included.
  virtual int stream_count(int index) const noexcept = 0;
  virtual int stream_priority(const Stream& stream) const = 0;
  virtual bool query_stream(const Stream& stream) = 0;
  virtual void synchronize_stream(const Stream& stream) = 0;
  virtual void synchronize_device(int index) = 0;

  // Events. A recorded event completes when all work enqueued on its stream before the
  // record has completed; block() makes a stream wait for the latest record.
  virtual std::unique_ptr<BackendEvent> create_event(int index, bool timing) = 0;
  virtual void record_event(BackendEvent& event, const Stream& stream) = 0;
  virtual void block_event(BackendEvent& event, const Stream& stream) = 0;
  virtual bool query_event(BackendEvent& event) = 0;
  virtual void synchronize_event(BackendEvent& event) = 0;
  virtual double elapsed_ms(BackendEvent& start, BackendEvent& end) = 0;
  // True when the backend itself tells the launch observers (observer.h) of each event
  // record and wait as its device runtime performs them; Event and the allocator then do
  // not. The interpreted CUDA device does, so that the stream sanitizer checks the waits
  // the cuda backend really made rather than those the runtime asked it for.
  virtual bool reports_orderings() const noexcept = 0;

  // Work. submit() is the only way work reaches a stream; runtime/backend/launch.h wraps it.
  virtual void submit(const Stream& stream, HostFn fn) = 0;
  // Keeps `stream` busy for `microseconds` without blocking the host.
  virtual void sleep(const Stream& stream, double microseconds) = 0;
  // Enqueues a byte copy on `stream`. Either side may be host memory or memory of this
  // backend's devices; the caller (runtime/memory/copy.cc) handles ordering across devices.
  virtual void copy_async(void* dst, const void* src, size_t bytes, const Stream& stream) = 0;
  // Enqueues a byte fill of memory of the stream's device (not host memory: cudaMemset
  // cannot reach pageable host memory, and a host fill needs no stream).
  virtual void fill_async(void* dst, unsigned char value, size_t bytes,
                          const Stream& stream) = 0;

  // Raw device memory for the caching allocator. raw_alloc returns nullptr when the
  // device is out of memory. raw_free waits until no queued work can still use the
  // memory (as cudaFree does).
  virtual void* raw_alloc(int index, size_t bytes) = 0;
  virtual void raw_free(int index, void* ptr) = 0;
  // Total device memory in bytes (the configured limit on sim).
  virtual size_t total_memory(int index) const = 0;
  // Virtual memory, for the allocator's expandable segments: an address range reserved
  // with no memory behind it, in which memory is mapped and unmapped in multiples of
  // vm_granularity(). vm_granularity is 0 where the backend cannot do this (then the
  // others are never called). vm_reserve returns nullptr when no range of that size is
  // left; vm_map puts memory behind [ptr, ptr + bytes) inside a reserved range, false
  // when the device is out of memory, and first waits for an earlier vm_unmap of any of
  // those bytes to finish; vm_unmap takes the memory away once no queued work can still
  // use it, as raw_free does (sim defers it and returns at once; cuda waits for the
  // device's queued work, as cudaFree).
  virtual size_t vm_granularity(int index) const = 0;
  virtual void* vm_reserve(int index, size_t bytes) = 0;
  virtual bool vm_map(int index, void* ptr, size_t bytes) = 0;
  virtual void vm_unmap(int index, void* ptr, size_t bytes) = 0;
  // Host memory the device can copy from asynchronously (page-locked on cuda).
  virtual void* pinned_alloc(size_t bytes) = 0;
  virtual void pinned_free(void* ptr) noexcept = 0;
};

// The registered backend for `type`, constructing it on first use; throws DeviceError
// naming the type and why it is absent (e.g. built without CUDA).
Backend& backend(DeviceType type);
// The same, or nullptr if no backend of that type was linked in.
Backend* find_backend(DeviceType type);

namespace detail {
using BackendFactory = std::unique_ptr<Backend> (*)();
bool register_backend(DeviceType type, BackendFactory factory);
}  // namespace detail

}  // namespace streamgrad

#define SG_REGISTER_BACKEND(TYPE, CLASS)                                              \
  static const bool sg_backend_registered_##CLASS = ::streamgrad::detail::register_backend( \
      TYPE, []() -> std::unique_ptr<::streamgrad::Backend> { return std::make_unique<CLASS>(); })

#endif  // STREAMGRAD_RUNTIME_BACKEND_BACKEND_H_

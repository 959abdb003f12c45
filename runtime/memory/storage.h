// Storage: a reference-counted buffer of device memory from the caching allocator.
//
//   Storage a = Storage::allocate(1024);                 // current device, current stream
//   Storage b = Storage::allocate(1024, Device("sim:0")); // explicit device wins
//   Storage c = Storage::allocate(1024, side_stream);     // owned by side_stream
//   c.record_stream(other_stream);  // c is read on other_stream: see S8
//   Storage h = Storage::pinned(1024);                   // pinned host memory (cpu)
//
// The memory goes back to its allocator (the device's caching allocator, or the caching
// host allocator of host_memory.h for pinned storage) when the last copy of the handle is
// dropped; a
// buffer used on a stream other than its allocation stream must be record_stream()ed on
// that stream first, or it may be reused while that stream still reads it.
// Storage::id() is unique per allocation for the life of the process (buffers are named
// by it in sanitizer findings and traces).
// Thread-safety: handles may be copied and dropped from any thread (shared_ptr rules).
// Failure: allocate throws OutOfMemoryError / DeviceError and allocates nothing.
#ifndef STREAMGRAD_RUNTIME_MEMORY_STORAGE_H_
#define STREAMGRAD_RUNTIME_MEMORY_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/backend/stream.h"
#include "runtime/base/device.h"

namespace streamgrad {

class Storage {
 public:
  Storage() = default;

  static Storage allocate(size_t nbytes);
  static Storage allocate(size_t nbytes, Device device);
  static Storage allocate(size_t nbytes, const Stream& stream);
  // Pinned host memory (host_memory.h) on the cpu device: non-blocking copies from and to
  // it do not block the host, and record_stream() protects it like device memory.
  static Storage pinned(size_t nbytes);

  bool defined() const { return impl_ != nullptr; }
  void* data() const;
  size_t nbytes() const;
  Device device() const;
  // The stream the memory was allocated on.
  Stream stream() const;
  uint64_t id() const;
  bool is_pinned() const;
  void record_stream(const Stream& stream) const;
  // True when no stream but its allocation stream and `stream` was recorded as using the
  // memory: a write on `stream` then cannot overtake a read another stream still has
  // queued (the engine writes gradients in place only then).
  bool used_only_on(const Stream& stream) const;
  long use_count() const { return impl_.use_count(); }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_STORAGE_H_

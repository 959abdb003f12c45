#include "runtime/memory/storage.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "runtime/backend/config.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"
#include "runtime/memory/caching_allocator.h"
#include "runtime/memory/host_memory.h"

namespace streamgrad {

struct Storage::Impl {
  // `a` null: pinned host memory from the caching host allocator.
  Impl(DeviceAllocator* a, void* p, size_t n, Stream s, uint64_t i)
      : allocator(a), ptr(p), nbytes(n), stream(s), id(i) {}
  ~Impl() {
    try {
      if (allocator != nullptr) {
        allocator->free(ptr);
      } else {
        pinned_free(ptr);
      }
    } catch (...) {
      // free() only throws for pointers it does not own, which a Storage never holds.
    }
  }
  DeviceAllocator* const allocator;
  void* const ptr;
  const size_t nbytes;
  const Stream stream;
  const uint64_t id;
  std::mutex mu;
  std::vector<Stream> users;  // streams record_stream() named, allocation stream aside
};

namespace {
uint64_t next_id() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}
const char* kUndefined = "Storage: the storage is undefined (default-constructed)";
}  // namespace

Storage Storage::allocate(size_t nbytes) { return allocate(nbytes, current_device()); }

Storage Storage::allocate(size_t nbytes, Device device) {
  return allocate(nbytes, current_stream(resolve_device(device, "Storage::allocate")));
}

Storage Storage::allocate(size_t nbytes, const Stream& stream) {
  const Device d = resolve_device(stream.device(), "Storage::allocate");
  const Stream s = Stream::unchecked(d, stream.id());
  DeviceAllocator& a = allocator_for(d);
  void* p = a.allocate(nbytes, s);
  Storage out;
  try {
    out.impl_ = std::make_shared<Impl>(&a, p, nbytes, s, next_id());
  } catch (...) {
    a.free(p);
    throw;
  }
  return out;
}

Storage Storage::pinned(size_t nbytes) {
  void* p = pinned_alloc(nbytes);
  Storage out;
  try {
    out.impl_ = std::make_shared<Impl>(nullptr, p, nbytes,
                                       Stream::default_for(Device(DeviceType::kCpu)), next_id());
  } catch (...) {
    pinned_free(p);
    throw;
  }
  return out;
}

void* Storage::data() const {
  SG_CHECK(impl_, Error, kUndefined);
  return impl_->ptr;
}
size_t Storage::nbytes() const { return impl_ ? impl_->nbytes : 0; }
Device Storage::device() const {
  SG_CHECK(impl_, Error, kUndefined);
  return impl_->stream.device();
}
Stream Storage::stream() const {
  SG_CHECK(impl_, Error, kUndefined);
  return impl_->stream;
}
uint64_t Storage::id() const { return impl_ ? impl_->id : 0; }
bool Storage::is_pinned() const { return impl_ != nullptr && impl_->allocator == nullptr; }

void Storage::record_stream(const Stream& stream) const {
  SG_CHECK(impl_, Error, kUndefined);
  if (impl_->ptr == nullptr) return;  // zero bytes: nothing to protect
  const Device d = resolve_device(stream.device(), "Storage::record_stream");
  const Stream s = Stream::unchecked(d, stream.id());
  // Fault injection (config.h): this record may be the one a test leaves out.
  if (detail::sync_faults_on() && s != impl_->stream &&
      detail::sync_fault_skip(SyncKind::kRecordStream, s, nullptr, &impl_->stream)) {
    return;
  }
  if (s != impl_->stream) {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (std::find(impl_->users.begin(), impl_->users.end(), s) == impl_->users.end()) {
      impl_->users.push_back(s);
    }
  }
  if (impl_->allocator == nullptr) {
    pinned_record_stream(impl_->ptr, s);
  } else {
    impl_->allocator->record_stream(impl_->ptr, s);
  }
}

bool Storage::used_only_on(const Stream& stream) const {
  if (impl_ == nullptr) return true;
  std::lock_guard<std::mutex> lk(impl_->mu);
  return std::all_of(impl_->users.begin(), impl_->users.end(),
                     [&](const Stream& u) { return u == stream; });
}

}  // namespace streamgrad

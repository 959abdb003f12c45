#include "runtime/host_memory.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/backend.h"
#include "runtime/devices.h"
#include "runtime/error.h"

namespace streamgrad {
namespace {

struct PinnedRegistry {
  std::mutex mu;
  // start address -> (size, backend that owns it)
  std::map<const char*, std::pair<size_t, Backend*>> ranges;
};

PinnedRegistry& registry() {
  static auto* r = new PinnedRegistry();
  return *r;
}

Backend& pinned_backend() {
  if (is_available(DeviceType::kCuda)) return backend(DeviceType::kCuda);
  return backend(DeviceType::kCpu);
}

}  // namespace

void* pinned_alloc(size_t bytes) {
  Backend& b = pinned_backend();
  void* p = b.pinned_alloc(bytes);
  if (p == nullptr) {
    throw OutOfMemoryError(absl::StrCat("pinned_alloc: cannot allocate ", bytes,
                                        " bytes of pinned host memory"),
                           bytes, 0, 0);
  }
  PinnedRegistry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.ranges[static_cast<const char*>(p)] = {bytes == 0 ? 1 : bytes, &b};
  return p;
}

void pinned_free(void* ptr) {
  if (ptr == nullptr) return;
  Backend* owner = nullptr;
  {
    PinnedRegistry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.ranges.find(static_cast<const char*>(ptr));
    SG_CHECK(it != r.ranges.end(), ValueError, "pinned_free: 0x", absl::Hex(reinterpret_cast<uintptr_t>(ptr)),
             " was not returned by pinned_alloc");
    owner = it->second.second;
    r.ranges.erase(it);
  }
  owner->pinned_free(ptr);
}

bool is_pinned(const void* ptr) {
  PinnedRegistry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  const char* p = static_cast<const char*>(ptr);
  auto it = r.ranges.upper_bound(p);
  if (it == r.ranges.begin()) return false;
  --it;
  return p < it->first + it->second.first;
}

}  // namespace streamgrad

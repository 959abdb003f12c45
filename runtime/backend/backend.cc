#include "runtime/backend/backend.h"

#include <array>
#include <atomic>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

struct Slot {
  std::atomic<detail::BackendFactory> factory{nullptr};
  std::once_flag once;
  // Deliberately leaked at exit: worker threads of a backend may still be running when
  // static destructors run, and tearing a backend down under them would be a crash.
  std::atomic<Backend*> instance{nullptr};
};

std::array<Slot, kNumDeviceTypes>& slots() {
  static auto* s = new std::array<Slot, kNumDeviceTypes>();
  return *s;
}

}  // namespace

namespace detail {
bool register_backend(DeviceType type, BackendFactory factory) {
  slots()[static_cast<int>(type)].factory.store(factory);
  return true;
}
}  // namespace detail

Backend* find_backend(DeviceType type) {
  Slot& slot = slots()[static_cast<int>(type)];
  const detail::BackendFactory factory = slot.factory.load();
  if (factory == nullptr) return nullptr;
  std::call_once(slot.once, [&] { slot.instance.store(factory().release()); });
  return slot.instance.load();
}

Backend& backend(DeviceType type) {
  Backend* b = find_backend(type);
  if (b == nullptr) {
    throw DeviceError(absl::StrCat(
        "no ", device_type_name(type), " backend in this program",
        type == DeviceType::kCuda
            ? ": it links the lean library (//:streamgrad_lean), or the full one "
              "(//:streamgrad) was built without the CUDA toolkit (nvcc not found); use "
              "try_device() or is_available() to fall back to sim or cpu"
            : ": link //runtime (which registers the cpu and sim backends)"));
  }
  return *b;
}

}  // namespace streamgrad

#include "kernels/dispatch/registry.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace dispatch {
namespace internal {
namespace {

constexpr int kNumIds = static_cast<int>(KernelId::kNumKernels);

// Zero-initialised before any dynamic initialiser runs (constant initialisation), so
// registrations from other translation units' static initialisers are safe in any order.
std::atomic<const Entry*> g_table[kNumIds][kNumDeviceTypes];
std::atomic<bool> g_linked[kNumDeviceTypes];

int index_of(KernelId id) {
  const int i = static_cast<int>(id);
  SG_INTERNAL_CHECK(i >= 0 && i < kNumIds, "kernel id ", i, " out of range");
  return i;
}

}  // namespace

void set(KernelId id, DeviceType device, ErasedFn fn, ImplOptions options) {
  SG_INTERNAL_CHECK(fn != nullptr, "null implementation for ", kernel_id_name(id));
  const Entry* fresh = new Entry{fn, options};  // never freed: resolvers may hold it
  const Entry* expected = nullptr;
  const bool stored = g_table[index_of(id)][static_cast<int>(device)].compare_exchange_strong(
      expected, fresh, std::memory_order_acq_rel);
  if (!stored) delete fresh;
  SG_INTERNAL_CHECK(stored, "kernel ", kernel_id_name(id), " registered twice for ",
                    device_type_name(device));
}

const Entry* get(KernelId id, DeviceType device) {
  return g_table[index_of(id)][static_cast<int>(device)].load(std::memory_order_acquire);
}

void throw_missing(KernelId id, const char* name, const Stream& stream) {
  const DeviceType type = stream.device().type();
  const char* device = device_type_name(type);
  if (type == DeviceType::kCuda && !g_linked[static_cast<int>(type)].load()) {
    throw DeviceError(absl::StrCat(
        name, ": no implementation of kernel ", kernel_id_name(id), " for ", device,
        " (", stream.str(), "): this build has no cuda kernels (nvcc was not found when it "
        "was built); rebuild where the CUDA toolkit is installed, or use a sim or cpu device"));
  }
  throw DeviceError(absl::StrCat(name, ": no implementation of kernel ", kernel_id_name(id),
                                 " for ", device, " (", stream.str(),
                                 ") is registered; run it on a device type that has one"));
}

}  // namespace internal

bool has_impl(KernelId id, DeviceType device) { return internal::get(id, device) != nullptr; }

void note_backend_linked(DeviceType device) {
  internal::g_linked[static_cast<int>(device)].store(true);
}

}  // namespace dispatch
}  // namespace kernels
}  // namespace streamgrad

// The caching allocator's statistics, memory fraction and out-of-memory report, and the
// process-wide per-device allocators with their free-function API (caching_allocator.h).
// Block and segment management is in caching_allocator.cc.
#include <array>
#include <map>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/backend/config.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"
#include "runtime/memory/caching_allocator.h"
#include "runtime/memory/caching_allocator_block.h"

namespace streamgrad {

OutOfMemoryError DeviceAllocator::out_of_memory(size_t bytes, const Stream& stream,
                                                bool over_limit) {
  const int64_t allocated = stats_.allocated_bytes.current;
  const int64_t reserved = stats_.reserved_bytes.current;
  const int64_t total = static_cast<int64_t>(backend_.total_memory(device_.index()));
  const std::string sim_total =
      device_.type() == DeviceType::kSim ? " (STREAMGRAD_SIM_MEMORY_BYTES)" : "";
  std::string why;
  if (over_limit) {
    why = absl::StrCat("; the per-process memory fraction ", fraction_, " of ", device_.str(),
                       " allows ", format_bytes(static_cast<int64_t>(limit_)),
                       " of its total ", format_bytes(total), sim_total,
                       ". Raise it with set_per_process_memory_fraction(fraction, \"",
                       device_.str(), "\"), or free tensors that are no longer needed");
  } else {
    why = absl::StrCat("; device total ", format_bytes(total), sim_total,
                       expandable_ ? absl::StrCat(", mapped in pages of ",
                                                  format_bytes(static_cast<int64_t>(granularity_)),
                                                  " (expandable_segments)")
                                   : std::string(),
                       ". Free tensors that are no longer needed or use smaller batches");
  }
  return OutOfMemoryError(
      absl::StrCat(device_.str(), ": out of memory: tried to allocate ", format_bytes(bytes),
                   " on stream ", stream.str(), "; ", format_bytes(allocated),
                   " allocated and ", format_bytes(reserved), " reserved by streamgrad",
                   by_stream(), why),
      bytes, static_cast<size_t>(allocated), static_cast<size_t>(reserved));
}

std::string DeviceAllocator::by_stream() {
  struct Held {
    size_t allocated = 0, cached = 0, pending = 0;
  };
  std::map<StreamId, Held> held;  // kAnyStream: shared free blocks
  for (const auto& [addr, seg] : segments_) {
    for (const Block* b = seg.head; b != nullptr; b = b->next) {
      Held& h = held[b->allocated ? b->stream : free_key(b)];
      (b->allocated ? h.allocated : b->pending ? h.pending : h.cached) += b->size;
    }
  }
  std::string out;
  for (const auto& [s, h] : held) {
    absl::StrAppend(&out, out.empty() ? " (" : "; ",
                    s == kAnyStream ? "any stream" : Stream::unchecked(device_, s).str(), ": ",
                    format_bytes(static_cast<int64_t>(h.allocated)), " allocated, ",
                    format_bytes(static_cast<int64_t>(h.cached)), " cached");
    if (h.pending > 0) {
      absl::StrAppend(&out, ", ", format_bytes(static_cast<int64_t>(h.pending)),
                      " waiting for other streams' uses");
    }
  }
  return out.empty() ? out : out + ")";
}

MemoryStats DeviceAllocator::stats() {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void DeviceAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lk(mu_);
  stats_.reset_peak();
}

void DeviceAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lk(mu_);
  stats_.reset_accumulated();
}

void DeviceAllocator::set_memory_fraction(double fraction) {
  // NaN fails both comparisons, so it is refused too.
  SG_CHECK(fraction >= 0 && fraction <= 1, ValueError, "set_per_process_memory_fraction: ",
           "fraction ", fraction, " for ", device_.str(),
           " is outside [0, 1]; pass a share of the device's total memory, e.g. 0.5");
  const double total = static_cast<double>(backend_.total_memory(device_.index()));
  std::lock_guard<std::mutex> lk(mu_);
  fraction_ = fraction;
  limit_ = fraction == 1 ? std::numeric_limits<size_t>::max()
                         : static_cast<size_t>(std::floor(fraction * total));
}

double DeviceAllocator::memory_fraction() {
  std::lock_guard<std::mutex> lk(mu_);
  return fraction_;
}

DeviceAllocator& allocator_for(Device device) {
  const Device d = resolve_device(device, "allocator_for");
  // A malformed STREAMGRAD_* variable throws here, not inside call_once: libstdc++'s
  // call_once does not survive a throwing function everywhere (under ThreadSanitizer the
  // next call waits forever).
  const RuntimeConfig& c = config();
  struct Slot {
    std::once_flag once;
    DeviceAllocator* allocator = nullptr;  // leaked: buffers may outlive static teardown
  };
  static auto* slots = new std::array<std::array<Slot, kMaxDevicesPerType>, kNumDeviceTypes>();
  Slot& slot = (*slots)[static_cast<int>(d.type())][d.index()];
  std::call_once(slot.once, [&] {
    const bool caching = !c.no_memory_caching;
    slot.allocator = new DeviceAllocator(d, backend(d.type()), caching);
  });
  return *slot.allocator;
}

MemoryStats memory_stats(Device device) { return allocator_for(device).stats(); }
void reset_peak_stats(Device device) { allocator_for(device).reset_peak_stats(); }
void reset_accumulated_stats(Device device) { allocator_for(device).reset_accumulated_stats(); }
void set_per_process_memory_fraction(double fraction, Device device) {
  allocator_for(device).set_memory_fraction(fraction);
}
double get_per_process_memory_fraction(Device device) {
  return allocator_for(device).memory_fraction();
}
void empty_cache(Device device) { allocator_for(device).empty_cache(); }
std::vector<SegmentInfo> memory_snapshot(Device device) {
  return allocator_for(device).snapshot();
}
void set_cpu_cache_limit(size_t bytes) {
  allocator_for(Device(DeviceType::kCpu)).set_cache_limit(bytes);
}
size_t get_cpu_cache_limit() { return allocator_for(Device(DeviceType::kCpu)).cache_limit(); }

}  // namespace streamgrad

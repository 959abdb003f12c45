// The cpu allocator's direct mode (caching_allocator.h): every allocation is its own
// segment, registered in one flat hash map, with the same statistics, limits and
// observer notifications as the caching path but none of its Block bookkeeping.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"
#include "runtime/memory/caching_allocator.h"

namespace streamgrad {

void* DeviceAllocator::allocate_direct(size_t bytes, const Stream& stream) {
  const size_t size = (bytes + kDirectRound - 1) / kDirectRound * kDirectRound;
  // More than the whole device can never be met: refused before malloc sees it (the
  // sanitizer runtimes abort on such requests instead of returning null).
  void* p = size > total_memory_ ? nullptr : backend_.raw_alloc(device_.index(), size);
  bool over_limit = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const size_t held = static_cast<size_t>(stats_.reserved_bytes.current);
    over_limit = size > limit_ || held > limit_ - size;
    if (p == nullptr || over_limit) {
      ++stats_.num_ooms;
      OutOfMemoryError error = out_of_memory(bytes, stream, over_limit);
      if (p != nullptr) backend_.raw_free(device_.index(), p);
      throw error;
    }
    direct_live_.emplace(p, DirectBlock{size, bytes, stream.id()});
    stats_.reserved_bytes.update(static_cast<int64_t>(size));
    stats_.segments.update(1);
    ++stats_.num_segment_allocs;
    stats_.allocated_bytes.update(static_cast<int64_t>(size));
    stats_.requested_bytes.update(static_cast<int64_t>(bytes));
    stats_.active_bytes.update(static_cast<int64_t>(size));
    stats_.active_blocks.update(1);
    ++stats_.num_allocs;
  }
  if (detail::have_observers()) {
    detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(p, size); });
  }
  return p;
}

void DeviceAllocator::free_direct(void* ptr) {
  size_t size = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const DirectBlock b = direct_block(ptr, "free");
    direct_live_.erase(ptr);
    size = b.size;
    stats_.allocated_bytes.update(-static_cast<int64_t>(b.size));
    stats_.requested_bytes.update(-static_cast<int64_t>(b.requested));
    stats_.active_bytes.update(-static_cast<int64_t>(b.size));
    stats_.active_blocks.update(-1);
    ++stats_.num_frees;
    stats_.reserved_bytes.update(-static_cast<int64_t>(b.size));
    stats_.segments.update(-1);
    ++stats_.num_segment_frees;
  }
  backend_.raw_free(device_.index(), ptr);
  if (detail::have_observers()) {
    detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(ptr, size); });
  }
}

DeviceAllocator::DirectBlock DeviceAllocator::direct_block(void* ptr, const char* what) {
  auto it = direct_live_.find(ptr);
  SG_CHECK(it != direct_live_.end(), ValueError, what, ": 0x",
           absl::Hex(reinterpret_cast<uintptr_t>(ptr)), " is not a live allocation of the ",
           device_.str(), " allocator");
  return it->second;
}

std::vector<SegmentInfo> DeviceAllocator::direct_snapshot() {
  std::vector<SegmentInfo> out;
  out.reserve(direct_live_.size());
  for (const auto& [ptr, b] : direct_live_) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
    const Stream s = Stream::unchecked(device_, b.stream);
    out.push_back(SegmentInfo{device_, addr, b.size, s, {{addr, b.size, b.requested, true, false, s}}});
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return out;
}

}  // namespace streamgrad

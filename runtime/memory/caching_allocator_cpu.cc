// The cpu allocator's mode (caching_allocator.h): every block is its own segment of its
// size class, registered in one flat hash map, and a freed block waits in its class's free
// list, within the cache limit, for the next allocation of that class. Same statistics,
// limits and observer notifications as the sim/cuda path, none of its Block bookkeeping.
#include <algorithm>
#include <optional>

#include "absl/strings/str_format.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"
#include "runtime/memory/caching_allocator.h"
#include "runtime/memory/memory_history.h"

#if defined(__SANITIZE_ADDRESS__)
#define SG_CPU_CACHE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SG_CPU_CACHE_ASAN 1
#endif
#endif

#ifdef SG_CPU_CACHE_ASAN
#include <sanitizer/asan_interface.h>
#define SG_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SG_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SG_POISON(p, n) ((void)(p), (void)(n))
#define SG_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace streamgrad {
namespace {

constexpr int kSmallClasses = 16;  // 64, 128, ..., 1024 bytes
constexpr size_t kSmallMax = kSmallClasses * DeviceAllocator::kCpuRound;
// Classes above kSmallMax: four per power of two from 2^10 up to 2^kMaxLog2.
constexpr int kMaxLog2 = 62;
constexpr size_t kMaxBytes = size_t{1} << kMaxLog2;

// The class of a 64-byte-rounded size of at most kMaxBytes.
int size_class(size_t size) {
  if (size <= kSmallMax) return static_cast<int>(size / DeviceAllocator::kCpuRound) - 1;
  const int k = 63 - __builtin_clzll(size - 1);  // 2^k < size <= 2^(k+1)
  const size_t step = size_t{1} << (k - 2);
  const size_t sub = (size - (size_t{1} << k) + step - 1) / step;  // 1..4
  return kSmallClasses + (k - 10) * 4 + static_cast<int>(sub) - 1;
}

size_t class_size(int c) {
  if (c < kSmallClasses) return static_cast<size_t>(c + 1) * DeviceAllocator::kCpuRound;
  const int k = 10 + (c - kSmallClasses) / 4;
  const size_t sub = static_cast<size_t>((c - kSmallClasses) % 4 + 1);
  return (size_t{1} << k) + sub * (size_t{1} << (k - 2));
}

}  // namespace

void* DeviceAllocator::allocate_cpu(size_t bytes, const Stream& stream) {
  static_assert(kCpuClasses == kSmallClasses + 4 * (kMaxLog2 - 10 + 1),
                "one free list per class up to kMaxBytes");
  // More than the whole device can never be met: refused before malloc sees it (the
  // sanitizer runtimes abort on such requests instead of returning null), and before
  // rounding, which could wrap around.
  const bool too_big = bytes > std::min(total_memory_, kMaxBytes);
  const size_t size = too_big ? 0 : (bytes + kCpuRound - 1) / kCpuRound * kCpuRound;
  const int c = too_big ? 0 : size_class(size);
  const size_t segment = too_big ? 0 : class_size(c);
  const auto note_allocated = [&](void* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    cpu_live_.emplace(p, CpuBlock{size, bytes, stream.id(), c});
    stats_.allocated_bytes.update(static_cast<int64_t>(size));
    stats_.requested_bytes.update(static_cast<int64_t>(bytes));
    stats_.active_bytes.update(static_cast<int64_t>(size));
    stats_.active_blocks.update(1);
    ++stats_.num_allocs;
    detail::note_memory_event(MemoryAction::kAlloc, device_, stream.id(), p, size);
  };
  if (!too_big) {
    void* hit = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      std::vector<CpuCached>& cached = cpu_cached_[c];
      if (!cached.empty()) {
        // The most recently freed block of the class: its pages are the likeliest to be
        // resident and in the processor's caches.
        hit = cached.back().ptr;
        cached.pop_back();
        cpu_cached_bytes_ -= segment;
        ++stats_.num_cache_hits;
        note_allocated(hit);
        SG_UNPOISON(hit, size);
      }
    }
    if (hit != nullptr) {
      // A reused cpu block counts as fresh memory for the observers (the stream sanitizer),
      // as a block from malloc did before cpu blocks were cached: the allocator keeps no
      // record of other devices' streams that wrote into cpu memory (a copy from sim or
      // cuda), so ordering those before the free stays the caller's duty, as it was.
      if (detail::have_observers()) {
        detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(hit, segment); });
      }
      return hit;
    }
  }
  RawFrees released;
  void* p = nullptr;
  if (!too_big && segment <= total_memory_) {
    p = backend_.raw_alloc(device_.index(), segment);
    if (p == nullptr) {
      // The system refused: hand it the cache back and ask once more.
      {
        std::lock_guard<std::mutex> lk(mu_);
        trim_cpu_cache(0, released);
      }
      free_cpu_segments(released);
      released.clear();
      p = backend_.raw_alloc(device_.index(), segment);
    }
  }
  std::optional<OutOfMemoryError> error;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const auto over_limit = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const size_t held = static_cast<size_t>(stats_.reserved_bytes.current);
      return segment > limit_ || held > limit_ - segment;
    };
    if (p != nullptr && over_limit()) trim_cpu_cache(0, released);
    const bool over = over_limit();
    if (p == nullptr || over) {
      ++stats_.num_ooms;
      detail::note_memory_event(MemoryAction::kOom, device_, stream.id(), nullptr, bytes);
      error.emplace(out_of_memory(bytes, stream, over));
    } else {
      stats_.reserved_bytes.update(static_cast<int64_t>(segment));
      stats_.segments.update(1);
      ++stats_.num_segment_allocs;
      detail::note_memory_event(MemoryAction::kSegmentAlloc, device_, stream.id(), p, segment);
      note_allocated(p);
    }
  }
  free_cpu_segments(released);
  if (error.has_value()) {
    // Never announced to the observers: it goes back as it came.
    if (p != nullptr) backend_.raw_free(device_.index(), p);
    throw *error;
  }
  // Bytes past the rounded size are nobody's, as past the end of a malloc'd chunk.
  SG_POISON(static_cast<char*>(p) + size, segment - size);
  if (detail::have_observers()) {
    detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(p, segment); });
  }
  return p;
}

void DeviceAllocator::free_cpu(void* ptr) {
  RawFrees to_free;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const CpuBlock b = cpu_block(ptr, "free");
    cpu_live_.erase(ptr);
    const size_t segment = class_size(b.size_class);
    stats_.allocated_bytes.update(-static_cast<int64_t>(b.size));
    stats_.requested_bytes.update(-static_cast<int64_t>(b.requested));
    stats_.active_bytes.update(-static_cast<int64_t>(b.size));
    stats_.active_blocks.update(-1);
    ++stats_.num_frees;
    // Nothing on cpu waits for other streams: the free completes as it is asked for.
    detail::note_memory_event(MemoryAction::kFreeRequested, device_, b.stream, ptr, b.size);
    detail::note_memory_event(MemoryAction::kFreeCompleted, device_, b.stream, ptr, b.size);
    // cpu work is done once launched, so nothing can still use the block: reusable now.
    if (caching_ && segment <= cpu_cache_limit_) {
      trim_cpu_cache(cpu_cache_limit_ - segment, to_free);
      SG_POISON(ptr, segment);
      cpu_cached_[b.size_class].push_back(CpuCached{ptr, ++cpu_frees_});
      cpu_cached_bytes_ += segment;
    } else {
      stats_.reserved_bytes.update(-static_cast<int64_t>(segment));
      stats_.segments.update(-1);
      ++stats_.num_segment_frees;
      detail::note_memory_event(MemoryAction::kSegmentFree, device_, b.stream, ptr, segment);
      to_free.push_back({ptr, segment});
    }
  }
  free_cpu_segments(to_free);
}

void DeviceAllocator::trim_cpu_cache(size_t keep, RawFrees& to_free) {
  const auto drop = [&](void* p, size_t segment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    cpu_cached_bytes_ -= segment;
    stats_.reserved_bytes.update(-static_cast<int64_t>(segment));
    stats_.segments.update(-1);
    ++stats_.num_segment_frees;
    detail::note_memory_event(MemoryAction::kSegmentFree, device_, 0, p, segment);
    to_free.push_back({p, segment});
  };
  if (keep == 0) {
    for (int c = 0; c < kCpuClasses && cpu_cached_bytes_ > 0; ++c) {
      for (const CpuCached& b : cpu_cached_[c]) drop(b.ptr, class_size(c));
      cpu_cached_[c].clear();
    }
    return;
  }
  while (cpu_cached_bytes_ > keep) {
    // The least recently freed block heads its class's list: the oldest of the heads.
    int oldest = -1;
    for (int c = 0; c < kCpuClasses; ++c) {
      if (cpu_cached_[c].empty()) continue;
      if (oldest < 0 || cpu_cached_[c].front().freed < cpu_cached_[oldest].front().freed) {
        oldest = c;
      }
    }
    std::vector<CpuCached>& list = cpu_cached_[oldest];
    drop(list.front().ptr, class_size(oldest));
    list.erase(list.begin());
  }
}

void DeviceAllocator::take_all_cpu_blocks(RawFrees& to_free) {
  for (const auto& [ptr, b] : cpu_live_) to_free.push_back({ptr, class_size(b.size_class)});
  cpu_live_.clear();
  trim_cpu_cache(0, to_free);
  for (const RawFree& f : to_free) SG_UNPOISON(f.ptr, f.size);
}

void DeviceAllocator::free_cpu_segments(const RawFrees& segments) {
  for (const RawFree& f : segments) {
    SG_UNPOISON(f.ptr, f.size);
    backend_.raw_free(device_.index(), f.ptr);
  }
  if (!segments.empty() && detail::have_observers()) {
    for (const RawFree& f : segments) {
      detail::notify_observers([&](LaunchObserver& o) { o.on_memory_reset(f.ptr, f.size); });
    }
  }
}

void DeviceAllocator::set_cache_limit(size_t bytes) {
  SG_CHECK(cpu_, DeviceError, "set_cpu_cache_limit: the ", device_.str(),
           " allocator has no cache limit; only cpu's cache is capped (sim and cuda keep free "
           "segments until empty_cache() or an allocation needs the memory)");
  RawFrees to_free;
  {
    std::lock_guard<std::mutex> lk(mu_);
    cpu_cache_limit_ = bytes;
    trim_cpu_cache(bytes, to_free);
  }
  free_cpu_segments(to_free);
}

size_t DeviceAllocator::cache_limit() {
  SG_CHECK(cpu_, DeviceError, "get_cpu_cache_limit: the ", device_.str(),
           " allocator has no cache limit; only cpu's cache is capped");
  std::lock_guard<std::mutex> lk(mu_);
  return cpu_cache_limit_;
}

DeviceAllocator::CpuBlock DeviceAllocator::cpu_block(void* ptr, const char* what) {
  auto it = cpu_live_.find(ptr);
  SG_CHECK(it != cpu_live_.end(), ValueError, what, ": 0x",
           absl::Hex(reinterpret_cast<uintptr_t>(ptr)), " is not a live allocation of the ",
           device_.str(), " allocator");
  return it->second;
}

std::vector<SegmentInfo> DeviceAllocator::cpu_snapshot() {
  std::vector<SegmentInfo> out;
  out.reserve(cpu_live_.size());
  for (const auto& [ptr, b] : cpu_live_) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
    const Stream s = Stream::unchecked(device_, b.stream);
    out.push_back(SegmentInfo{device_, addr, class_size(b.size_class), s,
                              {{addr, b.size, b.requested, true, false, s}}});
  }
  const Stream s = Stream::unchecked(device_, 0);  // cpu has one stream
  for (int c = 0; c < kCpuClasses; ++c) {
    for (const CpuCached& b : cpu_cached_[c]) {
      const uintptr_t addr = reinterpret_cast<uintptr_t>(b.ptr);
      out.push_back(SegmentInfo{device_, addr, class_size(c), s,
                                {{addr, class_size(c), 0, false, false, s}}});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return out;
}

}  // namespace streamgrad

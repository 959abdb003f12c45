#include "runtime/memory/memory_history.h"

#include <chrono>
#include <deque>
#include <map>
#include <mutex>

#include "runtime/backend/observer.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace detail {
std::atomic<bool> g_memory_history_on{false};
}  // namespace detail

namespace {

thread_local const char* t_category = nullptr;

struct History {
  std::mutex mu;
  std::deque<MemoryEvent> events;
  size_t max_entries = kDefaultMemoryHistoryEntries;
  int64_t dropped = 0;
  std::chrono::steady_clock::time_point start;
  std::mutex toggle_mu;    // serialises starts and stops; taken before mu, never by launches
  bool observing = false;  // guarded by toggle_mu
  // Live blocks allocated outside any LaunchScope (forward ops, factories), by address:
  // their end, and their alloc event's number (dropped + its place in `events`), until
  // a launch writes into them or they are freed.
  struct Unnamed {
    uintptr_t end;
    int64_t event;
  };
  std::map<uintptr_t, Unnamed> unnamed;
};

History& history() {
  static auto* h = new History();  // never destroyed: allocators free during exit
  return *h;
}

// While it is installed the engine opens a LaunchScope per backward node (it does so only
// when someone observes), which names what backward allocates. What forward allocates is
// named after the first launch that writes into it: ops allocate their outputs before
// they launch, under no scope of their own, and the kernel that fills a block is what made
// it (its launch name: "matmul", "layer_norm on cuda", "copy"...).
class OpNames : public LaunchObserver {
  void on_launch(const Stream&, const LaunchDesc& desc) override {
    if (desc.writes.empty()) return;
    History& h = history();
    std::lock_guard<std::mutex> lk(h.mu);
    if (h.unnamed.empty()) return;
    for (const MemRange& w : desc.writes) {
      const uintptr_t p = reinterpret_cast<uintptr_t>(w.ptr);
      auto it = h.unnamed.upper_bound(p);
      if (it == h.unnamed.begin()) continue;
      --it;
      if (p >= it->second.end) continue;
      const int64_t at = it->second.event - h.dropped;
      if (at >= 0) h.events[static_cast<size_t>(at)].op = desc.name;
      h.unnamed.erase(it);
    }
  }
};
OpNames g_op_names;

}  // namespace

const char* memory_action_name(MemoryAction action) {
  switch (action) {
    case MemoryAction::kAlloc: return "alloc";
    case MemoryAction::kFreeRequested: return "free_requested";
    case MemoryAction::kFreeCompleted: return "free_completed";
    case MemoryAction::kSegmentAlloc: return "segment_alloc";
    case MemoryAction::kSegmentFree: return "segment_free";
    case MemoryAction::kOom: return "oom";
  }
  return "unknown";
}

void record_memory_history(bool enabled, size_t max_entries) {
  SG_CHECK(!enabled || max_entries > 0, ValueError,
           "record_memory_history: max_entries must be at least 1 (got 0); pass "
           "enabled=false to stop recording");
  History& h = history();
  // The observer list is changed without h.mu held: a launch takes the list's lock, then
  // h.mu (OpNames), so holding h.mu here while taking the list's would invert that order.
  std::lock_guard<std::mutex> toggle(h.toggle_mu);
  if (enabled && !h.observing) add_launch_observer(&g_op_names);
  {
    std::lock_guard<std::mutex> lk(h.mu);
    if (enabled) {
      h.events.clear();
      h.dropped = 0;
      h.max_entries = max_entries;
      h.start = std::chrono::steady_clock::now();
    }
    h.unnamed.clear();
    detail::g_memory_history_on.store(enabled, std::memory_order_relaxed);
  }
  if (!enabled && h.observing) remove_launch_observer(&g_op_names);
  h.observing = enabled;
}

bool memory_history_enabled() { return detail::memory_history_on(); }

namespace detail {
std::vector<MemoryEvent> memory_history_and_dropped(int64_t& dropped) {
  History& h = history();
  std::lock_guard<std::mutex> lk(h.mu);
  dropped = h.dropped;
  return {h.events.begin(), h.events.end()};
}
}  // namespace detail

std::vector<MemoryEvent> memory_history() {
  int64_t dropped = 0;
  return detail::memory_history_and_dropped(dropped);
}

int64_t memory_history_dropped() {
  History& h = history();
  std::lock_guard<std::mutex> lk(h.mu);
  return h.dropped;
}

MemoryCategoryScope::MemoryCategoryScope(const char* category) : previous_(t_category) {
  t_category = category;
}

MemoryCategoryScope::~MemoryCategoryScope() { t_category = previous_; }

const char* current_memory_category() {
  if (t_category != nullptr) return t_category;
  // The engine's worker threads run each backward node under a LaunchScope.
  return current_launch_scope() != nullptr ? "gradient" : "other";
}

namespace detail {

void record_memory_event(MemoryAction action, const Device& device, StreamId stream,
                         const void* address, size_t size, bool pinned) {
  const std::string* op = current_launch_scope();
  MemoryEvent e{action,
                device,
                stream,
                reinterpret_cast<uintptr_t>(address),
                static_cast<int64_t>(size),
                current_memory_category(),
                op != nullptr ? *op : std::string(),
                0,
                pinned};
  History& h = history();
  std::lock_guard<std::mutex> lk(h.mu);
  // Recording may have stopped since the caller looked: an event after the stop is not
  // part of the record.
  if (!memory_history_on()) return;
  e.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - h.start)
                  .count();
  const uintptr_t address_value = reinterpret_cast<uintptr_t>(address);
  if (action == MemoryAction::kAlloc && e.op.empty() && size > 0) {
    const int64_t number = h.dropped + static_cast<int64_t>(h.events.size());
    h.unnamed[address_value] = History::Unnamed{address_value + size, number};
  } else if (action == MemoryAction::kFreeRequested) {
    h.unnamed.erase(address_value);  // never written: it keeps no name
  }
  h.events.push_back(std::move(e));
  while (h.events.size() > h.max_entries) {
    h.events.pop_front();
    ++h.dropped;
  }
}

}  // namespace detail

}  // namespace streamgrad

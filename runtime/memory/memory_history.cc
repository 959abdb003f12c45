#include "runtime/memory/memory_history.h"

#include <chrono>
#include <deque>
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
  bool observing = false;
};

// Watches nothing: while it is installed the engine opens a LaunchScope per backward node
// (it does so only when someone observes), which gives the history its op names.
class NodeNames : public LaunchObserver {
  void on_launch(const Stream&, const LaunchDesc&) override {}
};
NodeNames g_node_names;

History& history() {
  static auto* h = new History();  // never destroyed: allocators free during exit
  return *h;
}

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
  std::lock_guard<std::mutex> lk(h.mu);
  if (enabled) {
    h.events.clear();
    h.dropped = 0;
    h.max_entries = max_entries;
    h.start = std::chrono::steady_clock::now();
  }
  detail::g_memory_history_on.store(enabled, std::memory_order_relaxed);
  if (enabled != h.observing) {
    if (enabled) {
      add_launch_observer(&g_node_names);
    } else {
      remove_launch_observer(&g_node_names);
    }
    h.observing = enabled;
  }
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
                         const void* address, size_t size) {
  const std::string* op = current_launch_scope();
  MemoryEvent e{action,
                device,
                stream,
                reinterpret_cast<uintptr_t>(address),
                static_cast<int64_t>(size),
                current_memory_category(),
                op != nullptr ? *op : std::string(),
                0};
  History& h = history();
  std::lock_guard<std::mutex> lk(h.mu);
  // Recording may have stopped since the caller looked: an event after the stop is not
  // part of the record.
  if (!memory_history_on()) return;
  e.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - h.start)
                  .count();
  h.events.push_back(std::move(e));
  while (h.events.size() > h.max_entries) {
    h.events.pop_front();
    ++h.dropped;
  }
}

}  // namespace detail

}  // namespace streamgrad

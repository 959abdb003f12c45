// Memory history: a bounded record of what the device allocators and the pinned host
// allocator did, for finding out what holds memory at its peak (the reference framework's
// _record_memory_history, _snapshot and _dump_snapshot). Each event says what happened
// (an allocation, a free asked for, a free completed once other streams' uses were done,
// a segment reserved from or returned to the device, an out-of-memory), where (device,
// stream, address, bytes), when (since recording started), and for what: the category and
// the op current on the allocating thread. tools/memviz draws a dump as a page of memory
// over time by category.
//
//   record_memory_history(true);                 // clears what was recorded, starts
//   { MemoryCategoryScope c("optimizer"); opt.step(); }
//   dump_memory_snapshot("memory.json");         // the events and every segment now
//   record_memory_history(false);
//
// Categories are names the caller chooses (tools/train files its parameters, batches,
// forward and optimiser under "parameter", "input", "activation" and "optimizer");
// allocations under no scope are "gradient" inside a backward node and "other" elsewhere.
// The op is the innermost LaunchScope's label: the engine names each backward node it runs
// there (recording installs a launch observer so that it does). A block allocated under
// no scope (a forward op's output, a factory's tensor) is named after the first launch
// that writes into it, the kernel that fills it ("matmul", "copy"...); one never written
// keeps an empty op. Recording costs nothing while it is off (one atomic load per
// allocator event); while on, each event and each launch that writes takes a lock. The
// oldest events are dropped beyond max_entries, and the dump says how many.
//
// Not in runtime/runtime.h: include this header itself (Bazel: //runtime:memory_history).
//
// Thread-safety: every function is thread-safe; a MemoryCategoryScope belongs to the thread
// that made it and nests. Failure: record_memory_history(true, 0) is a ValueError;
// dump_memory_snapshot raises IOError naming the path when it cannot write.
#ifndef STREAMGRAD_RUNTIME_MEMORY_MEMORY_HISTORY_H_
#define STREAMGRAD_RUNTIME_MEMORY_MEMORY_HISTORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend/stream.h"
#include "runtime/base/device.h"

namespace streamgrad {

enum class MemoryAction {
  kAlloc,          // a block handed out
  kFreeRequested,  // freed by its owner; other streams may still use it
  kFreeCompleted,  // reusable: its uses on other streams are done
  kSegmentAlloc,   // memory reserved from the device
  kSegmentFree,    // memory returned to the device
  kOom,            // a request the device and the cache could not meet (size: the request)
};
// "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom".
const char* memory_action_name(MemoryAction action);

struct MemoryEvent {
  MemoryAction action;
  Device device;
  StreamId stream;
  uintptr_t address;
  int64_t size;  // bytes of the block or segment (rounded as the allocator holds them)
  std::string category;
  std::string op;
  int64_t time_us;  // since record_memory_history(true)
  // Page-locked host memory of the pinned allocator (pinned_alloc: offloaded activations,
  // staged batches), not the device allocators': `device` is cpu, `stream` 0, and a dump
  // names its device "pinned".
  bool pinned = false;
};

constexpr size_t kDefaultMemoryHistoryEntries = 1000000;

// Starts (clearing earlier events) or stops recording. Segments reserved before the start
// appear in a dump's segments, not among its events.
void record_memory_history(bool enabled, size_t max_entries = kDefaultMemoryHistoryEntries);
bool memory_history_enabled();
// The recorded events, oldest first, and how many older ones were dropped.
std::vector<MemoryEvent> memory_history();
int64_t memory_history_dropped();

// {"version":1,"events":[...],"dropped":N,"segments":[...]}: the events, and the segments
// and blocks every device that has events (and cpu) holds now (memory_snapshot()).
std::string memory_snapshot_json();
void dump_memory_snapshot(const std::string& path);

// Files this thread's allocations under `category` until it ends (the string must outlive
// the scope: a literal or a name kept elsewhere).
class MemoryCategoryScope {
 public:
  explicit MemoryCategoryScope(const char* category);
  ~MemoryCategoryScope();
  MemoryCategoryScope(const MemoryCategoryScope&) = delete;
  MemoryCategoryScope& operator=(const MemoryCategoryScope&) = delete;

 private:
  const char* previous_;
};
// The innermost scope's category on this thread; without one, "gradient" inside a
// LaunchScope (a backward node), otherwise "other".
const char* current_memory_category();

namespace detail {
extern std::atomic<bool> g_memory_history_on;
inline bool memory_history_on() { return g_memory_history_on.load(std::memory_order_relaxed); }
// The allocators' hook: call only when memory_history_on().
void record_memory_event(MemoryAction action, const Device& device, StreamId stream,
                         const void* address, size_t size, bool pinned = false);
// The events and the dropped count, read together.
std::vector<MemoryEvent> memory_history_and_dropped(int64_t& dropped);
inline void note_memory_event(MemoryAction action, const Device& device, StreamId stream,
                              const void* address, size_t size) {
  if (memory_history_on()) record_memory_event(action, device, stream, address, size);
}
// The pinned host allocator's hook (runtime/memory/host_memory.cc).
inline void note_pinned_event(MemoryAction action, const void* address, size_t size) {
  if (memory_history_on()) {
    record_memory_event(action, Device(DeviceType::kCpu), 0, address, size, /*pinned=*/true);
  }
}
}  // namespace detail

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_MEMORY_HISTORY_H_

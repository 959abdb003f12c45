// PendingUses: blocks freed on the host while streams may still use them, shared by the
// device caching allocator (caching_allocator.h) and the pinned host allocator
// (host_memory.h). See S8.
//
//   uses.add(block, {reader_stream});   // at free: one event recorded per stream, now
//   uses.poll(done);                    // blocks whose events have all completed
//
// An event recorded at free time completes once the stream has run everything enqueued
// on it before the free, so a block comes back only after every use that the host could
// have enqueued. Observers (sanitizer, trace) see each record, and each completion the
// host learns of as concerning the block's bytes alone (on_event_done_with): reuse is
// ordered for the sanitizer, and nothing else is, whenever the allocator happened to look.
// Events are pooled per device.
//
// Thread-safety: none of its own; the owning allocator calls every method under its lock,
// except wait(), which runs unlocked on a Batch taken out with take().
// Failure: backend errors (event creation) propagate; add() records nothing for a block
// if creating its first event throws.
#ifndef STREAMGRAD_RUNTIME_MEMORY_PENDING_USES_H_
#define STREAMGRAD_RUNTIME_MEMORY_PENDING_USES_H_

#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/stream.h"
#include "runtime/base/device.h"

namespace streamgrad {

class PendingUses {
 public:
  struct Entry {
    std::unique_ptr<BackendEvent> event;
    Device device;
    const void* block;
    const void* ptr;  // the block's bytes, for the observers
    size_t bytes;
  };
  using Batch = std::deque<Entry>;

  // Records an event on each of `streams` for `block`, whose bytes are [ptr, ptr + bytes);
  // `streams` must not be empty.
  void add(const void* block, const void* ptr, size_t bytes, const std::vector<Stream>& streams);
  // Appends the blocks whose last event has completed (queried without waiting).
  void poll(std::vector<const void*>& done);
  // An event from the pool, recorded on `on` now and made known to the observers (the
  // caching allocator's share markers use these too); recycle() takes it back.
  std::unique_ptr<BackendEvent> record(const Stream& on);
  void recycle(Device device, std::unique_ptr<BackendEvent> event);
  // Tells the observers that the host learnt `event` completed, for [ptr, ptr + bytes)
  // alone.
  static void notify_done(const BackendEvent& event, const void* ptr, size_t bytes);
  bool empty() const { return entries_.empty(); }

  // Waiting without the allocator's lock (a wait may run sim work that frees memory):
  // take() everything, wait() unlocked, then finish() under the lock again.
  Batch take();
  static void wait(Batch& batch);
  void finish(Batch&& batch, std::vector<const void*>& done);

 private:
  std::unique_ptr<BackendEvent> get_event(Device device);
  // The event completed: pool it and count the block down.
  void complete(Entry&& e, std::vector<const void*>& done);

  Batch entries_;
  std::unordered_map<const void*, int> events_left_;
  std::map<Device, std::vector<std::unique_ptr<BackendEvent>>> pool_;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_PENDING_USES_H_

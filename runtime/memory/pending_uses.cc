#include "runtime/memory/pending_uses.h"

#include <utility>

#include "runtime/backend/launch.h"
#include "runtime/base/error.h"

namespace streamgrad {

void PendingUses::add(const void* block, const void* ptr, size_t bytes,
                      const std::vector<Stream>& streams) {
  SG_INTERNAL_CHECK(!streams.empty(), "a pending block needs at least one stream");
  for (const Stream& on : streams) {
    entries_.push_back(Entry{record(on), on.device(), block, ptr, bytes});
    ++events_left_[block];
  }
}

std::unique_ptr<BackendEvent> PendingUses::record(const Stream& on) {
  std::unique_ptr<BackendEvent> event = get_event(on.device());
  Backend& b = backend(on.device().type());
  {
    detail::OrderingReport report;
    b.record_event(*event, on);
  }
  if (!b.reports_orderings()) {
    const void* key = event.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_record(key, on); });
  }
  return event;
}

void PendingUses::recycle(Device device, std::unique_ptr<BackendEvent> event) {
  pool_[device].push_back(std::move(event));
}

void PendingUses::poll(std::vector<const void*>& done) {
  Batch still;
  while (!entries_.empty()) {
    Entry e = std::move(entries_.front());
    entries_.pop_front();
    if (!backend(e.device.type()).query_event(*e.event)) {
      still.push_back(std::move(e));
      continue;
    }
    // The host now knows that stream passed the free: reuse is ordered after its uses.
    notify_done(*e.event, e.ptr, e.bytes);
    complete(std::move(e), done);
  }
  entries_ = std::move(still);
}

PendingUses::Batch PendingUses::take() {
  Batch out;
  out.swap(entries_);
  return out;
}

void PendingUses::wait(Batch& batch) {
  for (Entry& e : batch) {
    backend(e.device.type()).synchronize_event(*e.event);
    notify_done(*e.event, e.ptr, e.bytes);
  }
}

void PendingUses::notify_done(const BackendEvent& event, const void* ptr, size_t bytes) {
  const void* key = &event;
  detail::notify_observers([&](LaunchObserver& o) { o.on_event_done_with(key, ptr, bytes); });
}

void PendingUses::finish(Batch&& batch, std::vector<const void*>& done) {
  for (Entry& e : batch) complete(std::move(e), done);
  batch.clear();
}

void PendingUses::complete(Entry&& e, std::vector<const void*>& done) {
  recycle(e.device, std::move(e.event));
  auto it = events_left_.find(e.block);
  SG_INTERNAL_CHECK(it != events_left_.end(), "completed event of an unknown block");
  if (--it->second == 0) {
    events_left_.erase(it);
    done.push_back(e.block);
  }
}

std::unique_ptr<BackendEvent> PendingUses::get_event(Device device) {
  std::vector<std::unique_ptr<BackendEvent>>& pool = pool_[device];
  if (pool.empty()) return backend(device.type()).create_event(device.index(), false);
  std::unique_ptr<BackendEvent> e = std::move(pool.back());
  pool.pop_back();
  return e;
}

}  // namespace streamgrad

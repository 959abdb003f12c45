#include "runtime/event.h"

#include <atomic>

#include "runtime/devices.h"
#include "runtime/launch.h"
#include "runtime/error.h"

namespace streamgrad {

namespace {
std::atomic<uint64_t> g_records{0};
}  // namespace

uint64_t events_recorded() { return g_records.load(std::memory_order_relaxed); }
void Event::record(const Stream& stream) {
  const Device d = resolve_device(stream.device(), "Event::record");
  if (device_.has_value() && *device_ != d) {
    throw DeviceError(absl::StrCat("Event::record: the event belongs to ", device_->str(),
                                   " (its first record) but the stream ", stream.str(),
                                   " is on ", d.str(),
                                   "; use one event per device"));
  }
  Backend& b = backend(d.type());
  const Stream s = Stream::unchecked(d, stream.id());
  SG_CHECK(b.stream_exists(s), DeviceError, "Event::record: stream ", s.str(),
           " does not exist");
  if (impl_ == nullptr) impl_ = b.create_event(d.index(), timing_);
  b.record_event(*impl_, s);
  g_records.fetch_add(1, std::memory_order_relaxed);
  if (detail::have_observers()) {
    const void* key = impl_.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_record(key, s); });
  }
  device_ = d;
}

void Event::record(Device device) { record(current_stream(device)); }

void Event::block(const Stream& stream) const {
  // Never recorded, or recorded on the synchronous cpu stream: already complete.
  if (impl_ == nullptr || device_->is_cpu()) return;
  const Device d = resolve_device(stream.device(), "Event::block");
  if (d.is_cpu()) {
    synchronize();  // the cpu stream is the host: waiting is a host wait
    return;
  }
  SG_CHECK(d.type() == device_->type(), DeviceError, "Event::block: event recorded on ",
           device_->str(), " cannot order stream ", stream.str(), " of another device type; ",
           "synchronize the event on the host instead");
  const Stream s = Stream::unchecked(d, stream.id());
  backend(d.type()).block_event(*impl_, s);
  if (detail::have_observers()) {
    const void* key = impl_.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_block(key, s); });
  }
}

bool Event::query() const {
  if (impl_ == nullptr) return true;
  const bool done = backend(device_->type()).query_event(*impl_);
  if (done && detail::have_observers()) {
    const void* key = impl_.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_complete(key); });
  }
  return done;
}

void Event::synchronize() const {
  if (impl_ == nullptr) return;
  backend(device_->type()).synchronize_event(*impl_);
  if (detail::have_observers()) {
    const void* key = impl_.get();
    detail::notify_observers([&](LaunchObserver& o) { o.on_event_complete(key); });
  }
}

double Event::elapsed_ms(const Event& end) const {
  SG_CHECK(timing_ && end.timing_, Error,
           "Event::elapsed_ms: both events must be created with timing (Event(true))");
  SG_CHECK(impl_ != nullptr && end.impl_ != nullptr, Error,
           "Event::elapsed_ms: both events must be recorded first");
  SG_CHECK(*device_ == *end.device_, DeviceError, "Event::elapsed_ms: events on ",
           device_->str(), " and ", end.device_->str(), " cannot be compared");
  SG_CHECK(query() && end.query(), Error,
           "Event::elapsed_ms: both events must have completed; call synchronize() first");
  return backend(device_->type()).elapsed_ms(*impl_, *end.impl_);
}

}  // namespace streamgrad

#include "runtime/backend/stream.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/event.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

constexpr int kPoolSize = 32;

// Current stream id per (device type, index) for this thread; 0 is the default stream.
using CurrentTable = std::array<std::array<StreamId, kMaxDevicesPerType>, kNumDeviceTypes>;

CurrentTable& current_table() {
  thread_local CurrentTable table{};
  return table;
}

struct Pool {
  std::once_flag once;
  std::array<StreamId, kPoolSize> ids{};
  std::atomic<uint32_t> next{0};
};

Pool& pool_for(Device d) {
  static auto* pools = new std::array<std::array<Pool, kMaxDevicesPerType>, kNumDeviceTypes>();
  return (*pools)[static_cast<int>(d.type())][d.index()];
}

Backend& checked_backend(const Stream& s, const char* op) {
  Backend& b = backend(s.device().type());
  SG_CHECK(b.stream_exists(s), DeviceError, op, ": stream ", s.str(),
           " does not exist on ", s.device().str(),
           "; make streams with Stream::create or Stream::from_pool");
  return b;
}

}  // namespace

Stream Stream::create(Device device, int priority) {
  const Device d = resolve_device(device, "Stream::create");
  return Stream(d, backend(d.type()).create_stream(d.index(), priority));
}

Stream Stream::from_pool(Device device) {
  const Device d = resolve_device(device, "Stream::from_pool");
  if (d.is_cpu()) return Stream(d, 0);
  Pool& pool = pool_for(d);
  std::call_once(pool.once, [&] {
    for (StreamId& id : pool.ids) id = backend(d.type()).create_stream(d.index(), 0);
  });
  return Stream(d, pool.ids[pool.next.fetch_add(1) % kPoolSize]);
}

Stream Stream::default_for(Device device) {
  return Stream(resolve_device(device, "Stream::default_for"), 0);
}

int Stream::priority() const {
  return checked_backend(*this, "Stream::priority").stream_priority(*this);
}

std::string Stream::str() const { return absl::StrCat(device_.str(), "/s", id_); }

bool Stream::query() const {
  return checked_backend(*this, "Stream::query").query_stream(*this);
}

void Stream::synchronize() const {
  checked_backend(*this, "Stream::synchronize").synchronize_stream(*this);
  const Stream self = *this;
  detail::notify_observers([&](LaunchObserver& o) { o.on_stream_synchronize(self); });
}

void Stream::wait_stream(const Stream& other) const {
  if (other == *this || other.device().is_cpu()) return;  // in order already / synchronous
  Event e;
  e.record(other);
  e.block(*this);
}

void Stream::wait_event(const Event& event) const { event.block(*this); }

std::ostream& operator<<(std::ostream& os, const Stream& s) { return os << s.str(); }

Stream current_stream(Device device) {
  const Device d = resolve_device(device, "current_stream");
  return Stream::unchecked(d, current_table()[static_cast<int>(d.type())][d.index()]);
}

void set_current_stream(const Stream& stream) {
  const Device d = resolve_device(stream.device(), "set_current_stream");
  SG_CHECK(d == stream.device(), DeviceError, "set_current_stream: stream ", stream.str(),
           " has no device index");
  checked_backend(stream, "set_current_stream");
  current_table()[static_cast<int>(d.type())][d.index()] = stream.id();
}

}  // namespace streamgrad

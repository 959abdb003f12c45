#include "runtime/launch.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/config.h"
#include "runtime/devices.h"
#include "runtime/error.h"
#include "runtime/stream_sanitizer.h"
#include "runtime/trace.h"

namespace streamgrad {
namespace {

struct Observers {
  std::mutex mu;
  std::vector<LaunchObserver*> list;
  std::atomic<int> count{0};  // lets launches skip the lock when nobody observes
};

Observers& observers() {
  static auto* o = new Observers();
  return *o;
}

// Validates the stream, tells the observers, then hands the work to the backend.
template <typename Submit>
void dispatch(const Stream& stream, const LaunchDesc& desc, Submit submit) {
  // STREAMGRAD_SANITIZE_STREAMS=1 installs the process-wide sanitizer before any work.
  // STREAMGRAD_TRACE=path starts the process-wide recorder the same way.
  static StreamSanitizer* const sanitizer = global_stream_sanitizer();
  static TraceRecorder* const trace = global_trace();
  (void)sanitizer;
  (void)trace;
  const Device d = resolve_device(stream.device(), desc.name);
  const Stream s = Stream::unchecked(d, stream.id());
  Backend& b = backend(d.type());
  SG_CHECK(b.stream_exists(s), DeviceError, desc.name, ": stream ", s.str(),
           " does not exist; make streams with Stream::create or Stream::from_pool");
  Observers& o = observers();
  if (o.count.load(std::memory_order_acquire) > 0) {
    // A recorder's launch in progress must not outlive this call, whatever throws.
    struct ClearTrace {
      ~ClearTrace() { detail::clear_traced_launch(); }
    } clear_trace;
    {
      std::lock_guard<std::mutex> lk(o.mu);
      for (LaunchObserver* obs : o.list) obs->on_launch(s, desc);
    }
    submit(b, s);
    detail::notify_observers([&](LaunchObserver& obs) { obs.on_launch_submitted(s); });
  } else {
    submit(b, s);
  }
  if (launch_blocking()) b.synchronize_stream(s);
}

}  // namespace

namespace detail {
bool have_observers() { return observers().count.load(std::memory_order_acquire) > 0; }

void notify_observers(const std::function<void(LaunchObserver&)>& fn) {
  if (!have_observers()) return;
  Observers& o = observers();
  std::lock_guard<std::mutex> lk(o.mu);
  for (LaunchObserver* obs : o.list) fn(*obs);
}
}  // namespace detail

namespace {
thread_local const std::string* t_launch_scope = nullptr;
}  // namespace

LaunchScope::LaunchScope(std::string label)
    : label_(std::move(label)), previous_(t_launch_scope) {
  t_launch_scope = &label_;
}

LaunchScope::~LaunchScope() { t_launch_scope = previous_; }

const std::string* current_launch_scope() { return t_launch_scope; }

void add_launch_observer(LaunchObserver* observer) {
  Observers& o = observers();
  std::lock_guard<std::mutex> lk(o.mu);
  o.list.push_back(observer);
  o.count.store(static_cast<int>(o.list.size()), std::memory_order_release);
}

void remove_launch_observer(LaunchObserver* observer) {
  Observers& o = observers();
  std::lock_guard<std::mutex> lk(o.mu);
  o.list.erase(std::remove(o.list.begin(), o.list.end(), observer), o.list.end());
  o.count.store(static_cast<int>(o.list.size()), std::memory_order_release);
}

void launch(const Stream& stream, const LaunchDesc& desc, HostFn fn) {
  dispatch(stream, desc, [&](Backend& b, const Stream& s) { b.submit(s, std::move(fn)); });
}

namespace detail {
void launch_on_host(const Stream& stream, const LaunchDesc& desc, absl::FunctionRef<void()> fn) {
  // The cpu backend's submit runs the work at once; calling it here is the same, minus
  // the HostFn.
  dispatch(stream, desc, [&](Backend&, const Stream&) { fn(); });
}
}  // namespace detail

void copy_async(const Stream& stream, void* dst, const void* src, size_t bytes) {
  const MemRange reads[] = {{src, bytes}};
  const MemRange writes[] = {{dst, bytes}};
  dispatch(stream, {"copy", reads, writes, LaunchKind::kCopy},
           [&](Backend& b, const Stream& s) { b.copy_async(dst, src, bytes, s); });
}

void fill_async(const Stream& stream, void* dst, unsigned char value, size_t bytes) {
  const MemRange writes[] = {{dst, bytes}};
  dispatch(stream, {"fill", {}, writes, LaunchKind::kFill},
           [&](Backend& b, const Stream& s) { b.fill_async(dst, value, bytes, s); });
}

void sleep(const Stream& stream, double microseconds) {
  SG_CHECK(microseconds >= 0, ValueError, "sleep: microseconds must be >= 0, got ",
           microseconds);
  dispatch(stream, {"sleep", {}, {}, LaunchKind::kSleep},
           [&](Backend& b, const Stream& s) { b.sleep(s, microseconds); });
}

}  // namespace streamgrad

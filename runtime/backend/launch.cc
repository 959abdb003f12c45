#include "runtime/backend/launch.h"

#include <utility>

#include "runtime/backend/config.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

// Validates the stream, tells the observers, then hands the work to the backend.
template <typename Submit>
void dispatch(const Stream& stream, const LaunchDesc& desc, Submit submit) {
  // Plug-ins (STREAMGRAD_SANITIZE_STREAMS, STREAMGRAD_TRACE) install before any work.
  detail::install_observer_plugins();
  const Device d = resolve_device(stream.device(), desc.name);
  const Stream s = Stream::unchecked(d, stream.id());
  Backend& b = backend(d.type());
  SG_CHECK(b.stream_exists(s), DeviceError, desc.name, ": stream ", s.str(),
           " does not exist; make streams with Stream::create or Stream::from_pool");
  if (detail::have_observers()) {
    // An observer's launch in progress must not outlive this call, whatever throws.
    struct EndLaunch {
      const Stream& s;
      ~EndLaunch() {
        detail::notify_observers([&](LaunchObserver& obs) { obs.on_launch_end(s); });
      }
    } end_launch{s};
    detail::notify_observers([&](LaunchObserver& obs) { obs.on_launch(s, desc); });
    submit(b, s);
    detail::notify_observers([&](LaunchObserver& obs) { obs.on_launch_submitted(s); });
  } else {
    submit(b, s);
  }
  if (launch_blocking()) b.synchronize_stream(s);
}

}  // namespace

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

#include "runtime/memory/copy.h"

#include <cstring>
#include <memory>

#include "runtime/backend/devices.h"
#include "runtime/backend/launch.h"
#include "runtime/backend/stream.h"
#include "runtime/memory/host_memory.h"

namespace streamgrad {

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                bool non_blocking) {
  const Device dd = resolve_device(dst_device, "copy_bytes");
  const Device sd = resolve_device(src_device, "copy_bytes");
  if (bytes == 0) return;
  if (dd.is_cpu() && sd.is_cpu()) {
    std::memmove(dst, src, bytes);
    return;
  }
  if (sd.is_cpu() || dd.is_cpu()) {
    const Stream s = current_stream(sd.is_cpu() ? dd : sd);
    copy_async(s, dst, src, bytes);
    const void* host = sd.is_cpu() ? src : dst;
    // The copy may still use the pinned block after the host moves on: note its stream
    // so that freeing the block cannot hand it out before the copy is done (S8).
    if (!non_blocking || !detail::note_pinned_use(host, s)) s.synchronize();
    return;
  }
  if (sd == dd) {
    copy_async(current_stream(sd), dst, src, bytes);
    return;
  }
  if (sd.type() != dd.type()) {
    std::unique_ptr<char[]> staging(new char[bytes]);
    copy_bytes(staging.get(), Device(DeviceType::kCpu), src, sd, bytes, false);
    copy_bytes(dst, dd, staging.get(), Device(DeviceType::kCpu), bytes, false);
    return;
  }
  const Stream src_stream = current_stream(sd);
  const Stream dst_stream = current_stream(dd);
  src_stream.wait_stream(dst_stream);  // the destination's earlier users finish first
  copy_async(src_stream, dst, src, bytes);
  dst_stream.wait_stream(src_stream);  // later work on the destination sees the copy
}

}  // namespace streamgrad

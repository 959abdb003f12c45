// Byte copies between any two devices, ordered against both devices' current streams.
//
// copy_bytes(dst, dst_device, src, src_device, bytes, non_blocking):
//   host -> device / device -> host   enqueued on the device's current stream. The host
//       waits for it unless non_blocking is set AND the host side is pinned
//       (host_memory.h); a non-blocking copy from pageable memory is blocking, as in CUDA.
//       A non-blocking copy notes its stream on the pinned block, which is therefore not
//       reused before the copy completes, even if freed at once.
//   device -> same device             enqueued on its current stream; never blocks.
//   device A -> device B (same type)  runs on A's current stream after that stream waits
//       for B's current stream (earlier users of the destination), and B's current stream
//       waits for the copy; never blocks the host. See ARCHITECTURE.md S7.
//   different accelerator types       staged through host memory; blocks the host.
// Thread-safety: as for launch(). Failure: DeviceError for absent devices; the copy is
// not started.
#ifndef STREAMGRAD_RUNTIME_MEMORY_COPY_H_
#define STREAMGRAD_RUNTIME_MEMORY_COPY_H_

#include <cstddef>

#include "runtime/base/device.h"

namespace streamgrad {

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                bool non_blocking = false);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_COPY_H_

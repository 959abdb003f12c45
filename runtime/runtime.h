// The runtime layer in one include: devices, streams, events, guards, launches, copies,
// the caching allocator, storage, the stream sanitizer, the trace recorder and the cpu
// kernels' settings (threads, code level). See ARCHITECTURE.md §3–4.
#ifndef STREAMGRAD_RUNTIME_RUNTIME_H_
#define STREAMGRAD_RUNTIME_RUNTIME_H_

#include "runtime/caching_allocator.h"
#include "runtime/config.h"
#include "runtime/copy.h"
#include "runtime/cpu_settings.h"
#include "runtime/cuda_settings.h"
#include "runtime/device.h"
#include "runtime/devices.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/event.h"
#include "runtime/guard.h"
#include "runtime/host_memory.h"
#include "runtime/launch.h"
#include "runtime/memory_stats.h"
#include "runtime/sim/sim.h"
#include "runtime/storage.h"
#include "runtime/stream.h"
#include "runtime/stream_sanitizer.h"
#include "runtime/trace.h"
#include "runtime/warning.h"

#endif  // STREAMGRAD_RUNTIME_RUNTIME_H_

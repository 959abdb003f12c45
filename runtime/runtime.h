// The runtime layer in one include: devices, streams, events, guards, launches and their
// observers, copies, the caching allocator, storage, the stream sanitizer, the trace
// recorder, synchronisation fault injection and the cpu kernels' settings (threads, code
// level). See ARCHITECTURE.md §2–4 (its packages: "Inside runtime/").
#ifndef STREAMGRAD_RUNTIME_RUNTIME_H_
#define STREAMGRAD_RUNTIME_RUNTIME_H_

#include "runtime/backend/config.h"
#include "runtime/backend/cpu_settings.h"
#include "runtime/backend/cuda_settings.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/event.h"
#include "runtime/backend/guard.h"
#include "runtime/backend/launch.h"
#include "runtime/backend/observer.h"
#include "runtime/backend/stream.h"
#include "runtime/backend/sync_faults.h"
#include "runtime/base/device.h"
#include "runtime/base/dtype.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"
#include "runtime/memory/caching_allocator.h"
#include "runtime/memory/copy.h"
#include "runtime/memory/host_memory.h"
#include "runtime/memory/memory_stats.h"
#include "runtime/memory/storage.h"
#include "runtime/observe/stream_sanitizer.h"
#include "runtime/observe/trace.h"
#include "runtime/sim/sim.h"

#endif  // STREAMGRAD_RUNTIME_RUNTIME_H_

// Pinned host memory: host buffers that accelerators can copy from and to asynchronously,
// from a caching host allocator (as the reference framework's CachingHostAllocator).
//
//   float* h = static_cast<float*>(pinned_alloc(n * sizeof(float)));
//   copy_bytes(dev, "sim:0", h, "cpu", n * sizeof(float), /*non_blocking=*/true);
//   pinned_free(h);   // safe: h is reused only after the copy's stream passed this point
//
// Blocks come from the backend's pinned_alloc (page-locked memory from the cuda backend
// when it has a device, otherwise ordinary host memory marked as pinned, so that the copy
// rules of copy.h are the same on sim and cuda). Sizes round up to a power of two (at
// least 512 bytes); a freed block is cached under its size and handed out again for the
// same rounded size. Every non-blocking copy_bytes that reads or writes a pinned block
// notes the copy's stream on it; pinned_record_stream notes any other use (a kernel that
// reads the block on a stream). A freed block with such uses records an event on each of
// those streams that still has work queued and is handed out again only after all have
// completed (see S8); freed after the streams were synchronised, it is cached at once.
// Pending blocks are noticed complete at the next pinned_alloc or host_empty_cache.
// STREAMGRAD_NO_MEMORY_CACHING=1 returns blocks to the backend instead (still after their
// uses). Statistics use MemoryStats (memory_stats.h): allocated/requested bytes of live
// blocks, reserved = blocks held from the backend, active = live + pending blocks.
//
// Thread-safety: all functions are thread-safe (one std::mutex).
// Failure: pinned_alloc throws OutOfMemoryError (after returning cached blocks to the
// backend and retrying once); pinned_free of a pointer that is not the start of a live
// block throws ValueError and frees nothing; pinned_record_stream of memory that is not
// pinned throws ValueError.
#ifndef STREAMGRAD_RUNTIME_MEMORY_HOST_MEMORY_H_
#define STREAMGRAD_RUNTIME_MEMORY_HOST_MEMORY_H_

#include <cstddef>

#include "runtime/backend/stream.h"
#include "runtime/memory/memory_stats.h"

namespace streamgrad {

void* pinned_alloc(size_t bytes);
void pinned_free(void* ptr);
// True for any address inside a live (allocated, not yet freed) pinned block.
bool is_pinned(const void* ptr);
// Notes that work on `stream` uses the pinned block containing `ptr` (like
// Storage::record_stream): when the block is freed, it is reused only after the work
// enqueued on `stream` so far completed. cpu streams need nothing (their work is done).
void pinned_record_stream(const void* ptr, const Stream& stream);

MemoryStats host_memory_stats();
void reset_peak_host_memory_stats();
void reset_accumulated_host_memory_stats();
// Waits for pending uses of freed blocks, then returns every cached block to the backend.
void host_empty_cache();

namespace detail {
// copy_bytes: notes a use by `stream` and returns true when `ptr` is pinned; returns false
// (and does nothing) otherwise.
bool note_pinned_use(const void* ptr, const Stream& stream);
}  // namespace detail

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_HOST_MEMORY_H_

// Internal to runtime/memory: the caching allocator's block, shared by the files that
// implement DeviceAllocator (caching_allocator.cc, caching_allocator_reuse.cc,
// caching_allocator_stats.cc). Thread-safety: every field is guarded by the allocator's
// mutex. Failure: none (plain data).
#ifndef STREAMGRAD_RUNTIME_MEMORY_CACHING_ALLOCATOR_BLOCK_H_
#define STREAMGRAD_RUNTIME_MEMORY_CACHING_ALLOCATOR_BLOCK_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/memory/caching_allocator.h"

namespace streamgrad {

struct DeviceAllocator::Block {
  char* ptr;
  size_t size;
  StreamId stream;
  size_t requested = 0;
  bool allocated = false;
  bool pending = false;
  // Free, and reusable by any stream: `stream` (its last owner) had run all its uses of
  // it when the allocator looked (caching_allocator_reuse.cc). Otherwise a free block is
  // its stream's alone.
  bool shared = false;
  // DeviceAllocator::frees_'s count when last freed (the latest of merged blocks'): gc
  // order, and which share marker covers it.
  uint64_t freed_at = 0;
  Block* prev = nullptr;  // neighbours inside the segment, in address order
  Block* next = nullptr;
  std::vector<StreamId> uses;  // other streams of the device (record_stream)
};

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_CACHING_ALLOCATOR_BLOCK_H_

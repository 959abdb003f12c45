// Pinned host memory: host buffers that accelerators can copy from and to asynchronously.
//
// pinned_alloc() takes page-locked memory from the cuda backend when it has a device,
// otherwise ordinary host memory marked as pinned, so that the copy rules (copy.h) are the
// same on sim and cuda. is_pinned() answers for any address inside such a buffer.
//
// Thread-safety: all functions are thread-safe.
// Failure: pinned_alloc throws OutOfMemoryError; pinned_free of a pointer that did not
// come from pinned_alloc throws ValueError and frees nothing.
#ifndef STREAMGRAD_RUNTIME_HOST_MEMORY_H_
#define STREAMGRAD_RUNTIME_HOST_MEMORY_H_

#include <cstddef>

namespace streamgrad {

void* pinned_alloc(size_t bytes);
void pinned_free(void* ptr);
bool is_pinned(const void* ptr);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_HOST_MEMORY_H_

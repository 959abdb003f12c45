// Pinned (page-locked) cpu tensors, as the reference framework's Tensor.pin_memory() and
// is_pinned(): a non-blocking copy to an accelerator from a pinned tensor does not block
// the host, and its memory is not reused until that copy completed, even when the tensor
// is dropped first (the caching host allocator, runtime/memory/host_memory.h).
//
//   Tensor batch = pin_memory(from_vector<float>(values, {64, 784}));
//   Tensor on_dev = to(batch, "sim:0", /*non_blocking=*/true);   // ops/ops.h
//   batch = Tensor();   // safe: the block comes back only after the copy ran
//
// pin_memory copies the tensor's elements into a new contiguous tensor in pinned host
// memory (same sizes and dtype, on cpu) and returns it; a tensor that is already pinned
// is returned as it is. The result has no autograd history.
//
// Thread-safety: all functions are thread-safe.
// Failure: Error for an undefined tensor; DeviceError for a tensor that is not on cpu;
// ValueError for a tensor that requires grad (pin its detach()) and for a negative size
// given to empty_pinned; OutOfMemoryError when no pinned memory is left. Nothing is
// allocated when they throw.
#ifndef STREAMGRAD_ENGINE_PINNED_H_
#define STREAMGRAD_ENGINE_PINNED_H_

#include "engine/tensor.h"

namespace streamgrad {

Tensor pin_memory(const Tensor& t);
// A new contiguous cpu tensor in pinned memory, its values unset (for a non-blocking copy
// from a device to land in).
Tensor empty_pinned(const Shape& sizes, DType dtype);
// True when t's storage is pinned host memory.
bool is_pinned(const Tensor& t);

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_PINNED_H_

#include "engine/pinned.h"

#include <atomic>
#include <memory>

#include "engine/factories.h"
#include "kernels/kernels.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"
#include "runtime/memory/storage.h"

namespace streamgrad {

bool is_pinned(const Tensor& t) {
  SG_CHECK(t.defined(), Error, "is_pinned: the tensor is undefined (default-constructed)");
  return t.storage().is_pinned();
}

Tensor pin_memory(const Tensor& t) {
  SG_CHECK(t.defined(), Error, "pin_memory: the tensor is undefined (default-constructed)");
  SG_CHECK(t.device().is_cpu(), DeviceError, "pin_memory: ", t.describe(),
           " is not on cpu; only host memory can be pinned (copy it with to(t, \"cpu\"))");
  // The reference framework's pin_memory is differentiable; ours has no backward, so it
  // refuses rather than silently cutting the graph.
  SG_CHECK(!t.requires_grad(), ValueError, "pin_memory: ", t.describe(),
           " requires grad and the pinned copy would have no autograd history; pin "
           "t.detach() instead");
  if (is_pinned(t)) return t;
  Tensor out = empty_pinned(t.sizes(), t.dtype());
  // A launch (not a memcpy) so that the stream sanitizer sees the host write into the
  // block, which may have been read by a copy on another stream before it was cached.
  kernels::copy(out.stream(), out.view(), t.view());
  return out;
}

Tensor empty_pinned(const Shape& sizes, DType dtype) {
  const int64_t numel = checked_numel(sizes, "empty_pinned");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::pinned(static_cast<size_t>(numel) * element_size(dtype));
  impl->sizes = sizes;
  impl->strides = kernels::contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->stream = current_stream(Device(DeviceType::kCpu));
  impl->version = std::make_shared<std::atomic<uint32_t>>(0);
  return Tensor(std::move(impl));
}

}  // namespace streamgrad

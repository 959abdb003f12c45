// to(device), to(dtype), clone, contiguous: copies, differentiable.
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "runtime/memory/copy.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

// S7: the gradient goes back to the source device by the same kind of copy.
struct ToDeviceBackward final : Node {
  explicit ToDeviceBackward(Device d) : source(d) {}
  std::string name() const override { return "ToDeviceBackward"; }
  TensorList apply(TensorList&& grads) override { return {to(grads[0], source)}; }
  Device source;
};

struct ToDTypeBackward final : Node {
  explicit ToDTypeBackward(DType d) : source(d) {}
  std::string name() const override { return "ToDTypeBackward"; }
  TensorList apply(TensorList&& grads) override { return {to(grads[0], source)}; }
  DType source;
};

}  // namespace

Tensor to(const Tensor& a, Device device, bool non_blocking) {
  check_defined(a, "to", "the input");
  const Device target = resolve_device(device, "to");
  if (target == a.device()) return a;
  Tensor src = a.is_contiguous() ? a : contiguous(a);
  Tensor out = new_output(a.sizes(), a.dtype(), target);
  copy_bytes(out.data_ptr(), target, src.data_ptr(), src.device(),
             static_cast<size_t>(a.numel()) * element_size(a.dtype()), non_blocking);
  // No record_stream for `out`: a cross-device copy runs on the source's stream, but the
  // target's current stream (which owns `out`) waits for it before anything else runs.
  if (any_requires_grad({a})) wire(std::make_shared<ToDeviceBackward>(a.device()), {a}, {out});
  return out;
}

Tensor to(const Tensor& a, DType dtype) {
  check_defined(a, "to", "the input");
  if (dtype == a.dtype()) return a;
  Tensor out = new_output(a.sizes(), dtype, a.device());
  kernels::copy(stream_of(out), out.view(), a.view());
  if (any_requires_grad({a}) && is_floating(dtype)) {
    wire(std::make_shared<ToDTypeBackward>(a.dtype()), {a}, {out});
  }
  return out;
}

}  // namespace streamgrad

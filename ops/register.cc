// Hands the engine what it needs from ops/ (accumulation, reduction to a shape and
// conversions of gradients): the engine sits below ops and cannot call them directly.
#include "engine/node.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "ops/view_history.h"

namespace streamgrad {
namespace {

Tensor engine_add_impl(const Tensor& a, const Tensor& b) { return add(a, b); }

Tensor to_dtype_impl(const Tensor& g, DType dtype) { return to(g, dtype); }
Tensor to_device_impl(const Tensor& g, Device device) { return to(g, device); }

const bool kRegistered = [] {
  EngineOps ops;
  ops.add = &engine_add_impl;
  ops.sum_to = &ops_internal::sum_to;
  ops.to_dtype = &to_dtype_impl;
  ops.to_device = &to_device_impl;
  ops.view_backward = &ops_internal::view_backward;
  set_engine_ops(ops);
  return true;
}();

}  // namespace
}  // namespace streamgrad

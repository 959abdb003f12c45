// Hands the engine the differentiable add it accumulates gradients with (the engine sits
// below ops and cannot call them directly).
#include "engine/node.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

Tensor engine_add_impl(const Tensor& a, const Tensor& b) { return add(a, b); }

// Sums the dimensions that `shape` broadcasts over (leading ones, and ones of size 1).
Tensor sum_to_impl(const Tensor& g, const Shape& shape) {
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
  }
  Tensor reduced = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return reshape(reduced, shape);
}

Tensor to_dtype_impl(const Tensor& g, DType dtype) { return to(g, dtype); }
Tensor to_device_impl(const Tensor& g, Device device) { return to(g, device); }

const bool kRegistered = [] {
  EngineOps ops;
  ops.add = &engine_add_impl;
  ops.sum_to = &sum_to_impl;
  ops.to_dtype = &to_dtype_impl;
  ops.to_device = &to_device_impl;
  set_engine_ops(ops);
  return true;
}();

}  // namespace
}  // namespace streamgrad

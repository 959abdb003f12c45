// Hands the engine the differentiable add it accumulates gradients with (the engine sits
// below ops and cannot call them directly).
#include "engine/node.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

Tensor engine_add_impl(const Tensor& a, const Tensor& b) { return add(a, b); }

const bool kRegistered = [] {
  set_engine_add(&engine_add_impl);
  return true;
}();

}  // namespace
}  // namespace streamgrad

#include "ops/autocast_policy.h"

#include "engine/grad_mode.h"
#include "ops/ops.h"

namespace streamgrad {
namespace ops_internal {
namespace {

bool eligible(const Tensor& t, DeviceType type) {
  return t.defined() && is_floating(t.dtype()) && t.device().type() == type;
}

}  // namespace

CastTarget autocast_target(CastPolicy policy, const std::vector<const Tensor*>& tensors) {
  CastTarget c;
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t->defined()) {
      first = t;
      break;
    }
  }
  if (first == nullptr) return c;
  c.device_type = first->device().type();
  if (!is_autocast_enabled(c.device_type)) return c;
  switch (policy) {
    case CastPolicy::kLowerPrecision:
      c.dtype = autocast_dtype(c.device_type);
      break;
    case CastPolicy::kFloat32:
      c.dtype = DType::kFloat32;
      break;
    case CastPolicy::kPromote: {
      bool any = false;
      for (const Tensor* t : tensors) {
        if (!eligible(*t, c.device_type)) continue;
        c.dtype = any ? promote_floating(c.dtype, t->dtype()) : t->dtype();
        any = true;
      }
      if (!any) return c;
      break;
    }
  }
  c.cast = true;
  return c;
}

Tensor autocast_cast(const Tensor& t, const CastTarget& c) {
  if (!c.cast || !eligible(t, c.device_type) || t.dtype() == c.dtype) return t;
  // Parameters cast down are cached for the scope: one conversion per forward. Not under
  // no_grad: a cast made there has no history, and a later use with grad would lose the
  // parameter's gradient.
  const bool cacheable = autocast_internal::cache_enabled() && grad_mode_enabled() &&
                         is_reduced_floating(c.dtype) &&
                         t.dtype() == DType::kFloat32 && t.is_leaf() && t.requires_grad();
  if (cacheable) {
    Tensor hit = autocast_internal::cache_lookup(t, c.dtype);
    if (hit.defined()) return hit;
  }
  Tensor cast = to(t, c.dtype);
  if (cacheable) autocast_internal::cache_insert(t, c.dtype, cast);
  return cast;
}

}  // namespace ops_internal
}  // namespace streamgrad

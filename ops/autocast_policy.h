// Internal to ops/: how an op applies the autocast policy of engine/autocast.h.
//
//   Tensor matmul(const Tensor& a, const Tensor& b) {
//     SG_AUTOCAST(kLowerPrecision, matmul, a, b);   // returns the cast call when active
//     ... the op on a and b ...
//   }
//
// When autocast is active on this thread, SG_AUTOCAST casts the op's tensor arguments
// (Tensor and std::vector<Tensor>; others pass through) by the policy, suspends autocast
// and calls the op again on the cast arguments, so the op's body and the ops it calls run
// as written, once. A tensor is cast when it is defined, floating, on the autocast device
// type of the op (the first defined tensor argument's device type) and of another dtype
// than the target; lower-precision casts of leaves that require grad go through the
// per-scope cache.
//
// The ops of each class:
//   kLowerPrecision  matmul, linear, conv2d
//   kFloat32         exp, log, log1p, rsqrt, pow, sum, mean, softmax, log_softmax,
//                    layer_norm, rms_norm, group_norm, nll_loss, cross_entropy, mse_loss
// (batch_norm is in no class: it runs in its input's dtype with float32 parameters and
// statistics, engine/autocast.h)
//   kPromote         where, cat, stack, scatter_add, scatter_reduce (add, sub, mul, div and the
//                    comparisons promote mixed floating inputs always, autocast or not)
//
// Thread-safety: per-thread state only. Failure: what the op and to() throw.
#ifndef STREAMGRAD_OPS_AUTOCAST_POLICY_H_
#define STREAMGRAD_OPS_AUTOCAST_POLICY_H_

#include <vector>

#include "engine/autocast.h"
#include "engine/tensor.h"

namespace streamgrad {
namespace ops_internal {

enum class CastPolicy { kLowerPrecision, kFloat32, kPromote };

// Where the op's eligible tensors go: nothing to do when !cast.
struct CastTarget {
  bool cast = false;
  DeviceType device_type = DeviceType::kCpu;
  DType dtype = DType::kFloat32;
};

CastTarget autocast_target(CastPolicy policy, const std::vector<const Tensor*>& tensors);
Tensor autocast_cast(const Tensor& t, const CastTarget& target);

inline void collect_tensors(std::vector<const Tensor*>* out, const Tensor& t) { out->push_back(&t); }
inline void collect_tensors(std::vector<const Tensor*>* out, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) out->push_back(&t);
}
template <typename T>
void collect_tensors(std::vector<const Tensor*>*, const T&) {}

inline Tensor cast_arg(const Tensor& t, const CastTarget& c) { return autocast_cast(t, c); }
inline std::vector<Tensor> cast_arg(const std::vector<Tensor>& ts, const CastTarget& c) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(autocast_cast(t, c));
  return out;
}
template <typename T>
const T& cast_arg(const T& v, const CastTarget&) {
  return v;
}

template <typename Fn, typename... Args>
auto autocast_call(CastPolicy policy, Fn&& fn, const Args&... args) {
  std::vector<const Tensor*> tensors;
  (collect_tensors(&tensors, args), ...);
  const CastTarget target = autocast_target(policy, tensors);
  autocast_internal::Suspend suspend;
  return fn(cast_arg(args, target)...);
}

}  // namespace ops_internal
}  // namespace streamgrad

#define SG_AUTOCAST(policy, op, ...)                                                          \
  do {                                                                                        \
    if (::streamgrad::autocast_internal::active()) {                                          \
      return ::streamgrad::ops_internal::autocast_call(                                       \
          ::streamgrad::ops_internal::CastPolicy::policy,                                     \
          [](const auto&... xs) { return op(xs...); }, __VA_ARGS__);                          \
    }                                                                                         \
  } while (0)

#endif  // STREAMGRAD_OPS_AUTOCAST_POLICY_H_

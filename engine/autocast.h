// Autocast: mixed-precision regions, as the reference framework's torch.autocast.
//
//   {
//     AutocastGuard amp(DeviceType::kCpu, DType::kBFloat16);
//     Tensor loss = cross_entropy(model->forward(x), y);  // linear/conv in bfloat16,
//   }                                                      // the loss in float32
//   loss.backward();  // each node runs in the dtype its forward used
//
// Inside a guard, ops on tensors of the guard's device type cast their floating inputs by
// a fixed policy (ops/autocast_policy.h lists the ops of each class):
//   lower precision   matmul, linear, conv2d: to the guard's dtype;
//   float32           exp, log, pow, sum, mean, softmax, log_softmax, layer_norm,
//                     rms_norm, group_norm and the losses: to float32, so that long sums and
//                     exponentials keep range;
//   promote           element-wise ops with several tensor inputs (where, cat, stack,
//                     scatter_add; add/sub/mul/div and comparisons always promote): to
//                     the widest dtype among the inputs;
// every other op runs in the dtype of its inputs. batch_norm is one of those, as in the
// reference framework's CUDA autocast: a 16-bit input keeps float32 weight, bias and
// running statistics, is normalised in float32 (the kernel widens it) and gives a 16-bit
// output, so the activations saved for backward stay 16-bit. Tensors on other device types, and
// non-floating tensors, are never cast: a guard on one device type leaves others alone.
//
// Casts of leaves that require grad (parameters) to the lower-precision dtype are cached
// while a guard is open, so a weight is converted once per forward however often it is
// used; the cache is cleared when the outermost guard closes (also a disabled one), as the
// reference framework does. Guards nest: an inner guard replaces the state for its device
// type (enabled, dtype) until it closes; `enabled = false` turns autocast off inside it.
// The backward pass never autocasts: the engine suspends it while nodes run, so gradients
// flow in the dtypes the forward chose and a cast's backward converts them back.
//
// Default dtypes (dtype omitted): bfloat16 on cpu, float16 on sim and cuda.
//
// Thread-safety: the state and the cache are per thread (as in the reference framework:
// a guard covers ops issued by the thread that opened it). Failure: ValueError for a
// dtype other than float16 or bfloat16; guards must close in reverse order of opening
// (they are scoped objects).
#ifndef STREAMGRAD_ENGINE_AUTOCAST_H_
#define STREAMGRAD_ENGINE_AUTOCAST_H_

#include <optional>

#include "engine/tensor.h"
#include "runtime/base/device.h"
#include "runtime/base/dtype.h"

namespace streamgrad {

class AutocastGuard {
 public:
  explicit AutocastGuard(DeviceType device_type, std::optional<DType> dtype = std::nullopt,
                         bool enabled = true, bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType type_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_;
};

bool is_autocast_enabled(DeviceType device_type);
// The dtype lower-precision ops use on `device_type` (its default when no guard set one).
DType autocast_dtype(DeviceType device_type);
DType default_autocast_dtype(DeviceType device_type);

namespace autocast_internal {

// Whether ops must consult the policy: some device type is enabled on this thread and
// autocast is not suspended. Every op asks, so it is one thread-local read.
bool active();
// Suspends autocast on this thread while it lives: the engine while nodes run, and an
// op's policy wrapper while the op's body runs on the cast inputs.
class Suspend {
 public:
  Suspend();
  ~Suspend();
  Suspend(const Suspend&) = delete;
  Suspend& operator=(const Suspend&) = delete;
};
// The cached cast of `source` to `dtype`, or an undefined Tensor; insert keeps one.
// Only used while a guard with cache_enabled is open.
bool cache_enabled();
Tensor cache_lookup(const Tensor& source, DType dtype);
void cache_insert(const Tensor& source, DType dtype, const Tensor& cast);
size_t cache_size();

}  // namespace autocast_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_AUTOCAST_H_

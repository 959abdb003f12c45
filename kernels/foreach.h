// Multi-tensor optimiser updates (the reference framework's "foreach" path): one launch
// updates every parameter of a list, where the per-tensor path launches several kernels
// per parameter; and the gradient scaler's unscale-and-check over a list of gradients
// (non_finite_check_and_unscale, below). The per-element math is kernels/functors/optim_ops.h.
//
//   std::vector<kernels::SgdParam> list = {{p.view(), g.view(), buf.view()}, ...};
//   kernels::sgd_update(stream, {lr, momentum, dampening, weight_decay, nesterov}, list);
//
// Every view of one call has one floating dtype (callers group parameters by device and
// dtype, one call per group; float16 and bfloat16 parameters and state are updated in
// float32 and rounded back, as kernels.h says); each parameter's grad and state views have its sizes and
// any strides. Parameters, grads and state views must be pairwise disjoint within an
// entry (checked); entries must not overlap one another (not checked). Empty parameters
// are skipped; a list with nothing to update launches nothing. The launch declares every
// grad as read and every parameter and state view as read and written.
// State that does not exist yet is created by the caller uninitialised and marked fresh:
// SGD's momentum buffer then takes the first gradient, Adam's moments start from 0.
//
// Thread-safety: as every kernel (any thread, any stream).
// On cuda streams (where nvcc built kernels/cuda) the one launch holds one kernel per
// parameter with the same per-element math.
// Failure, before anything is enqueued: DeviceError for cuda streams in a build without
// nvcc; ValueError naming
// the kernel and the entry for malformed or overlapping views, mismatched sizes or
// dtypes, non-floating dtypes, and an Adam step below 1. Launch names: sgd_update,
// adam_update, adamw_update, non_finite_check_and_unscale.
#ifndef STREAMGRAD_KERNELS_FOREACH_H_
#define STREAMGRAD_KERNELS_FOREACH_H_

#include <vector>

#include "kernels/functors/optim_ops.h"
#include "kernels/view.h"
#include "runtime/backend/stream.h"

namespace streamgrad {
namespace kernels {

struct SgdHyper {
  double lr = 0;
  double momentum = 0;  // 0: no momentum buffers (SgdParam::momentum_buffer unused)
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

struct SgdParam {
  View param;
  View grad;
  View momentum_buffer;
  bool fresh_buffer = false;  // the buffer holds nothing yet: it takes the gradient
};

void sgd_update(const Stream& stream, const SgdHyper& hyper, const std::vector<SgdParam>& params);

struct AdamHyper {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled = false;  // AdamW
};

struct AdamParam {
  View param;
  View grad;
  View exp_avg;
  View exp_avg_sq;
  double step = 1;           // this parameter's step count, this step included (>= 1)
  bool fresh_state = false;  // exp_avg and exp_avg_sq hold nothing yet: they start at 0
};

void adam_update(const Stream& stream, const AdamHyper& hyper,
                 const std::vector<AdamParam>& params);

// The reference framework's _amp_foreach_non_finite_check_and_unscale_ (what
// nn::GradScaler::unscale_ launches once per device and dtype): one launch multiplies
// every element of every grad by inv_scale in place and sets found_inf to 1.0 when any
// element of any grad is Inf or NaN. found_inf is never reset to 0 (callers zero-fill it
// first), so several calls can share one flag. Each element is multiplied in the grads'
// dtype by inv_scale rounded to it (NonFiniteCheckAndUnscale, kernels/functors/optim_ops.h); Inf
// and NaN elements are multiplied too.
//   grads: float32 or float64, all of grad 0's dtype, any sizes and strides, no two
// elements of one grad at one address (no broadcast stride 0); grads must not overlap one
// another (not checked). Empty grads are skipped; a list with nothing in it launches
// nothing. found_inf: one float32 element on the stream's device, disjoint from every
// grad (checked even when nothing is launched). The launch declares every grad and
// found_inf as read and written. On sim streams it runs asynchronously: the call only
// enqueues it, and reading found_inf is the caller's synchronisation. On cuda, one
// kernel per grad within the one launch.
void non_finite_check_and_unscale(const Stream& stream, const std::vector<View>& grads,
                                  const View& found_inf, double inv_scale);

// The per-element update of a call, in T (kernels/functors/optim_ops.h): the cpu and cuda kernels
// build it alike.
template <typename T>
SgdUpdate<T> make_sgd_update(const SgdHyper& h) {
  SgdUpdate<T> op;
  op.weight_decay = static_cast<T>(h.weight_decay);
  op.momentum = static_cast<T>(h.momentum);
  op.one_minus_dampening = static_cast<T>(1 - h.dampening);
  op.neg_lr = static_cast<T>(-h.lr);
  op.decay = h.weight_decay != 0;
  op.nesterov = h.nesterov;
  return op;
}

template <typename T>
AdamUpdate<T> make_adam_update(const AdamHyper& h) {
  AdamUpdate<T> op;
  op.beta1 = static_cast<T>(h.beta1);
  op.one_minus_beta1 = static_cast<T>(1 - h.beta1);
  op.beta2 = static_cast<T>(h.beta2);
  op.one_minus_beta2 = static_cast<T>(1 - h.beta2);
  op.eps = static_cast<T>(h.eps);
  op.weight_decay = static_cast<T>(h.weight_decay);
  op.decay_factor = static_cast<T>(1 - h.lr * h.weight_decay);
  op.decay = h.weight_decay != 0;
  op.decoupled = h.decoupled;
  return op;
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FOREACH_H_

// Gradient clipping, as libtorch's torch::nn::utils: clip_grad_norm_ scales every gradient
// by max_norm / (total norm + 1e-6) when that is below 1, clip_grad_value_ clamps each
// gradient element into [-clip_value, clip_value]. Parameters without a gradient are
// skipped; gradients are changed in place (their version counters move on).
//
//   loss.backward();
//   double norm = nn::utils::clip_grad_norm_(model->parameters(), /*max_norm=*/1.0);
//   opt.step();
//
// The total norm is the norm of the per-parameter norms (of `norm_type`: any p > 0, or
// infinity for the largest magnitude), computed on each gradient's device and gathered on
// the first gradient's, as the reference does. Each gradient takes a few kernels on its
// own stream (not one fused launch per device yet). Returning the norm as a number, as
// libtorch does, waits for those kernels.
//
// Thread-safety: call it from the thread that owns the parameters, as an optimiser step.
// Failure: ValueError for norm_type <= 0 (or NaN) or a negative clip_value; Error when
// error_if_nonfinite and the total norm is NaN or infinite (the gradients are then left
// as they were); what the ops throw otherwise.
#ifndef STREAMGRAD_NN_CLIP_GRAD_H_
#define STREAMGRAD_NN_CLIP_GRAD_H_

#include <vector>

#include "engine/tensor.h"

namespace streamgrad {
namespace nn {
namespace utils {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace utils
}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_CLIP_GRAD_H_

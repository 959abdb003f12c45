// One training step of a classifier, with optional mixed precision: what tools/train runs
// every batch, and what the tests, the missing-wait catalogue and bench/amp_memory share.
//
//   nn::AmpConfig amp = nn::amp_config("fp16", device);   // autocast in float16 ...
//   nn::GradScaler scaler;  amp.scaler = &scaler;          // ... with loss scaling
//   nn::StepResult r = nn::train_step(model, opt, batch, amp);
//   if (r.skipped) ...                                      // Inf/NaN gradients: no update
//
// A step is zero_grad, the forward and the cross-entropy loss under an AutocastGuard
// (engine/autocast.h), backward, and the optimiser step; given a GradScaler, backward runs
// on the scaled loss, the scaler decides whether the step runs (no Inf or NaN in the
// unscaled gradients) and updates its scale. The verdict is returned, not inferred.
//
// Thread-safety: as the module, optimiser and scaler it is given (one thread per step).
// Failure: whatever the model, loss, backward or optimiser throw; amp_config throws
// ValueError for an unknown mode and for fp16 on cpu.
#ifndef STREAMGRAD_NN_TRAIN_STEP_H_
#define STREAMGRAD_NN_TRAIN_STEP_H_

#include <string>

#include "nn/data/loader.h"
#include "nn/grad_scaler.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "ops/ops.h"

namespace streamgrad {
namespace nn {

// Mixed precision for a step: off, or autocast on `device_type` in `dtype`, with loss
// scaling when `scaler` is set (float16 needs it; bfloat16 has float32's range).
struct AmpConfig {
  bool enabled = false;
  DeviceType device_type = DeviceType::kCpu;
  DType dtype = DType::kBFloat16;
  GradScaler* scaler = nullptr;
};

struct StepResult {
  // The loss, detached and still on the device: reading it is the caller's choice, so the
  // host can run ahead of the device.
  Tensor loss;
  // The scaler found an Inf or NaN gradient and skipped the optimiser step (always false
  // without a scaler).
  bool skipped = false;
};

StepResult train_step(Module& model, Optimizer& optimizer, const Batch& batch,
                      const AmpConfig& amp = {});

// The loss train_step minimises: cross_entropy of the model's output against the batch's
// target, per example for a class target [B] and logits [B, C], position by position for
// a sequence target [B, T] and logits [B, T, C] (a language model's next tokens).
Tensor training_loss(const Tensor& logits, const Tensor& target,
                     const CrossEntropyOptions& options = {});

// train_step's two halves (bench/amp_memory measures between them): the loss of the
// forward under autocast; then backward and the optimiser step, through the scaler when
// there is one. backward_and_step returns whether the optimiser step ran.
Tensor amp_loss(Module& model, const Batch& batch, const AmpConfig& amp);
bool backward_and_step(const Tensor& loss, Optimizer& optimizer, const AmpConfig& amp);

// The modes of tools/train's --amp: "off", "bf16" or "fp16" for `device`, without a
// scaler (the caller makes one for fp16).
AmpConfig amp_config(const std::string& mode, Device device);
// The dtype policy in words, for a training report.
std::string amp_policy(const AmpConfig& amp);

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_TRAIN_STEP_H_

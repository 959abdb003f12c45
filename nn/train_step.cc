#include "nn/train_step.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/autocast.h"
#include "ops/ops.h"
#include "runtime/base/error.h"
#include "runtime/memory/memory_history.h"

namespace streamgrad {
namespace nn {

Tensor training_loss(const Tensor& logits, const Tensor& target,
                     const CrossEntropyOptions& options) {
  if (target.dim() < 2) return cross_entropy(logits, target, options);
  SG_CHECK(logits.dim() == target.dim() + 1, ValueError, "training_loss: a sequence target [",
           absl::StrJoin(target.sizes(), ", "), "] needs logits with one more dimension (the "
           "classes, last), got [", absl::StrJoin(logits.sizes(), ", "), "]");
  return cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(target, {-1}), options);
}

Tensor amp_loss(Module& model, const Batch& batch, const AmpConfig& amp) {
  const MemoryCategoryScope category("activation");
  AutocastGuard autocast(amp.device_type, amp.dtype, amp.enabled);
  return training_loss(model.forward(batch.data), batch.target);
}

bool backward_and_step(const Tensor& loss, Optimizer& optimizer, const AmpConfig& amp) {
  // For the memory history: backward nodes on the engine's threads file theirs under
  // "gradient" themselves; this thread's part of backward (the seed) joins them.
  if (amp.scaler == nullptr) {
    {
      const MemoryCategoryScope category("gradient");
      loss.backward();
    }
    const MemoryCategoryScope category("optimizer");
    optimizer.step();
    return true;
  }
  {
    const MemoryCategoryScope category("gradient");
    amp.scaler->scale(loss).backward();
  }
  const MemoryCategoryScope category("optimizer");
  const bool stepped = amp.scaler->step(optimizer);
  amp.scaler->update();
  return stepped;
}

StepResult train_step(Module& model, Optimizer& optimizer, const Batch& batch,
                      const AmpConfig& amp) {
  optimizer.zero_grad();
  const Tensor loss = amp_loss(model, batch, amp);
  const bool stepped = backward_and_step(loss, optimizer, amp);
  return StepResult{loss.detach(), !stepped};
}

AmpConfig amp_config(const std::string& mode, Device device) {
  AmpConfig c;
  c.device_type = device.type();
  if (mode == "off") return c;
  SG_CHECK(mode == "bf16" || mode == "fp16", ValueError, "unknown --amp=", mode,
           "; expected off, bf16 or fp16");
  SG_CHECK(mode == "bf16" || device.type() != DeviceType::kCpu, ValueError,
           "--amp=fp16 runs on sim and cuda devices; on cpu use --amp=bf16");
  c.enabled = true;
  c.dtype = mode == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  return c;
}

std::string amp_policy(const AmpConfig& amp) {
  if (!amp.enabled) return "amp off: everything in float32";
  const char* low = dtype_name(amp.dtype);
  return absl::StrCat(
      "amp ", low, ": matmul, linear and conv2d in ", low,
      "; softmax, log_softmax, losses, sums and exp/log/pow in float32; batch_norm and the "
      "other ops in their inputs' dtype (batch_norm normalising in float32); parameters, "
      "gradients and optimiser state in float32; ",
      amp.scaler != nullptr
          ? absl::StrFormat("dynamic loss scaling from %g", amp.scaler->get_scale())
          : std::string("no loss scaling"));
}

}  // namespace nn
}  // namespace streamgrad

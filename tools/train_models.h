// The models tools/train trains on 28x28 one-channel images with 10 classes:
//   mlp        Flatten, Linear 784-256, ReLU, Linear 256-256, ReLU, Linear 256-10
//   cnn        [Conv 3x3 (16), BatchNorm, ReLU, MaxPool 2] -> [Conv 3x3 (32), BatchNorm,
//              ReLU, MaxPool 2] -> Flatten, Linear 1568-128, ReLU, Dropout 0.25, Linear 128-10
//   twobranch  a dense branch (Linear 784-256, ReLU) and a convolutional branch (Conv 5x5
//              (8), ReLU, MaxPool 2, Linear 1568-256, ReLU) joined by concatenation into
//              Linear 512-10. With two streams each branch's forward runs on its own side
//              stream (each waits for the caller's stream first; the caller's stream waits
//              for both before the join), so backward replays them there too (S2).
//
// train_step is the step tools/train runs, shared with the tests of these models. With an
// AmpConfig it runs the forward and the loss under an AutocastGuard (engine/autocast.h)
// and, given a GradScaler, scales the loss, skips steps whose gradients overflowed and
// updates the scale (nn/grad_scaler.h).
//
// Thread-safety and failure: as nn::Module. make_model throws ValueError for an unknown
// name, amp_config for a bad --amp value.
#ifndef STREAMGRAD_TOOLS_TRAIN_MODELS_H_
#define STREAMGRAD_TOOLS_TRAIN_MODELS_H_

#include <memory>
#include <string>

#include "nn/data/loader.h"
#include "nn/grad_scaler.h"
#include "nn/layers.h"
#include "nn/optim.h"

namespace streamgrad {

class TwoBranch : public nn::Module {
 public:
  TwoBranch();
  // Side streams on `device` for the branches (two_streams), or everything on the
  // caller's stream. Streams are made once per model.
  void use_streams(Device device, bool two_streams);
  Tensor forward(const Tensor& images) override;
  // The same model (for DataParallel's replicas); it runs on one stream whatever
  // use_streams chose for this one.
  std::shared_ptr<Module> blank_copy() const override;

 private:
  std::shared_ptr<nn::Sequential> dense_, conv_;
  std::shared_ptr<nn::Linear> head_;
  bool two_streams_ = false;
  Stream side_[2] = {Stream::default_for(Device("cpu")), Stream::default_for(Device("cpu"))};
};

// "mlp", "cnn" or "twobranch", initialised from the current manual_seed.
std::shared_ptr<nn::Module> make_model(const std::string& name);

// One optimisation step on `batch` with the cross-entropy loss: zero_grad, forward,
// backward, step. Returns the loss, detached and still on the device: reading it is the
// caller's choice, so the host can run ahead of the device.
// Mixed precision for train_step: off, or autocast on `device_type` in `dtype`, with loss
// scaling when `scaler` is set (float16 needs it; bfloat16 has float32's range).
struct AmpConfig {
  bool enabled = false;
  DeviceType device_type = DeviceType::kCpu;
  DType dtype = DType::kBFloat16;
  nn::GradScaler* scaler = nullptr;
};
Tensor train_step(nn::Module& model, nn::Optimizer& optimizer, const nn::Batch& batch,
                  const AmpConfig& amp = {});
// train_step's two halves (bench/amp_memory measures between them): the loss of the
// forward under autocast, then backward and the optimiser step, through the scaler when
// there is one.
Tensor amp_loss(nn::Module& model, const nn::Batch& batch, const AmpConfig& amp);
void backward_and_step(const Tensor& loss, nn::Optimizer& optimizer, const AmpConfig& amp);
// tools/train's --amp: off, bf16 or fp16 for `device` (no scaler: the caller makes one
// for fp16). ValueError for another value, and for fp16 on cpu.
AmpConfig amp_config(const std::string& flag, Device device);
// The dtype policy in words, for the training report.
std::string amp_policy(const AmpConfig& amp);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_TRAIN_MODELS_H_

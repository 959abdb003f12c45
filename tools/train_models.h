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
// The training step they are trained with is nn/train_step.h.
//
// resnet and gpt: tools/train_models_gpt.h.
//
// Thread-safety and failure: as nn::Module. make_model throws ValueError for an unknown
// name.
#ifndef STREAMGRAD_TOOLS_TRAIN_MODELS_H_
#define STREAMGRAD_TOOLS_TRAIN_MODELS_H_

#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "tools/train_models_gpt.h"

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

// Re-makes `params` on `side` (after it waits for the caller's stream, which waits for it
// in turn, as the optimiser updates them there): a leaf accumulates .grad on the stream
// it was created on (S5), so a branch's parameters left on the caller's stream would cost
// a cross-stream wait per backward.
void make_parameters_on(const std::vector<Tensor>& params, const Stream& side);

// "mlp", "cnn", "twobranch", "resnet" or "gpt" (of `gpt`'s sizes: tools/train_models_gpt.h),
// initialised from the current manual_seed. With `checkpoint` the training forward keeps
// less for backward and recomputes the rest there (nn/recompute.h): the mlp in three
// segments of two modules, the cnn in three of four, one per block
// (nn::checkpoint_sequential; the last segment runs as usual), resnet's basic blocks and
// gpt's transformer blocks one by one. Parameters, state dicts and gradients are those of
// the plain model. twobranch has no checkpointed form (ValueError).
std::shared_ptr<nn::Module> make_model(const std::string& name, const GptConfig& gpt = {},
                                       bool checkpoint = false);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_TRAIN_MODELS_H_

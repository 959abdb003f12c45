#include "tools/train_models.h"

#include "engine/grad_mode.h"
#include "nn/init.h"
#include "nn/recompute.h"
#include "ops/ops.h"
#include "runtime/backend/guard.h"
#include "runtime/base/error.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

using ModuleList = std::vector<std::shared_ptr<nn::Module>>;

// A Sequential whose training forward keeps only what its segments' boundaries hold: every
// segment but the last runs again in backward (nn::checkpoint_sequential). Its state dict
// is the plain Sequential's, so checkpoint files do not depend on --checkpoint.
class CheckpointedSequential : public nn::Sequential {
 public:
  CheckpointedSequential(const ModuleList& modules, int segments)
      : Sequential(modules), segments_(segments) {}
  Tensor forward(const Tensor& input) override {
    if (!is_training() || !grad_mode_enabled()) return Sequential::forward(input);
    return nn::checkpoint_sequential(*this, segments_, input);
  }
  std::shared_ptr<Module> blank_copy() const override {
    ModuleList copies;
    for (size_t i = 0; i < size(); ++i) copies.push_back((*this)[i]->blank_copy());
    return std::make_shared<CheckpointedSequential>(copies, segments_);
  }

 private:
  int segments_;
};

std::shared_ptr<nn::Module> sequential(const ModuleList& modules, int segments) {
  if (segments <= 1) return std::make_shared<nn::Sequential>(modules);
  return std::make_shared<CheckpointedSequential>(modules, segments);
}

Conv2dParams padded(int64_t p) {
  Conv2dParams c;
  c.padding = {p, p};
  return c;
}

std::shared_ptr<nn::Module> mlp(bool checkpoint) {
  // Three segments of two modules: the hidden layers' outputs are recomputed.
  return sequential(ModuleList{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 256),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 256),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10)},
                    checkpoint ? 3 : 1);
}

std::shared_ptr<nn::Module> cnn(bool checkpoint) {
  // Three segments of four modules, one per convolutional block (the last takes the
  // head): of the blocks only their inputs stay saved. The first block is still
  // recomputed whole in backward, beside its gradients, so the peak drops less than the
  // saved bytes do (bench/RESULTS.md).
  return sequential(ModuleList{
      std::make_shared<nn::Conv2d>(1, 16, 3, padded(1)), std::make_shared<nn::BatchNorm2d>(16),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Conv2d>(16, 32, 3, padded(1)), std::make_shared<nn::BatchNorm2d>(32),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(32 * 7 * 7, 128),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.25),
      std::make_shared<nn::Linear>(128, 10)},
                    checkpoint ? 3 : 1);
}

}  // namespace

TwoBranch::TwoBranch() : Module("TwoBranch") {
  dense_ = register_module("dense", std::make_shared<nn::Sequential>(ModuleList{
                                        std::make_shared<nn::Flatten>(),
                                        std::make_shared<nn::Linear>(784, 256),
                                        std::make_shared<nn::ReLU>()}));
  conv_ = register_module("conv", std::make_shared<nn::Sequential>(ModuleList{
                                      std::make_shared<nn::Conv2d>(1, 8, 5, padded(2)),
                                      std::make_shared<nn::ReLU>(),
                                      std::make_shared<nn::MaxPool2d>(2),
                                      std::make_shared<nn::Flatten>(),
                                      std::make_shared<nn::Linear>(8 * 14 * 14, 256),
                                      std::make_shared<nn::ReLU>()}));
  head_ = register_module("head", std::make_shared<nn::Linear>(512, 10));
}

std::shared_ptr<nn::Module> TwoBranch::blank_copy() const {
  nn::init::NoInitGuard no_init;
  return std::make_shared<TwoBranch>();
}

void TwoBranch::use_streams(Device device, bool two_streams) {
  two_streams_ = two_streams && !device.is_cpu();
  if (!two_streams_) return;
  for (int i = 0; i < 2; ++i) {
    side_[i] = Stream::create(device);
    make_parameters_on((i == 0 ? dense_ : conv_)->parameters(), side_[i]);
  }
}

void make_parameters_on(const std::vector<Tensor>& params, const Stream& side) {
  const Stream main = current_stream(side.device());
  NoGradGuard no_grad;
  side.wait_stream(main);
  {
    StreamGuard on_side(side);
    for (const Tensor& p : params) {
      p.storage().record_stream(side);  // read there by the clone: not reused before (S8)
      p.set_data(streamgrad::clone(p.detach()));
    }
  }
  main.wait_stream(side);  // the optimiser updates them on main
}

Tensor TwoBranch::forward(const Tensor& images) {
  if (!two_streams_) return head_->forward(cat({dense_->forward(images), conv_->forward(images)}, 1));
  const Stream main = current_stream(images.device());
  Tensor branch[2];
  for (int i = 0; i < 2; ++i) {
    side_[i].wait_stream(main);  // the images (and the parameters' last update) are ready
    images.storage().record_stream(side_[i]);  // read there: not reused before (S8)
    StreamGuard on_side(side_[i]);
    branch[i] = (i == 0 ? dense_ : conv_)->forward(images);
  }
  for (int i = 0; i < 2; ++i) {
    main.wait_stream(side_[i]);
    branch[i].storage().record_stream(main);
  }
  return head_->forward(cat({branch[0], branch[1]}, 1));
}

std::shared_ptr<nn::Module> make_model(const std::string& name, const GptConfig& gpt,
                                       bool checkpoint) {
  if (name == "mlp") return mlp(checkpoint);
  if (name == "cnn") return cnn(checkpoint);
  if (name == "twobranch") {
    SG_CHECK(!checkpoint, ValueError, "make_model: twobranch has no checkpointed form "
             "(its branches run on their own streams); use mlp, cnn, resnet or gpt");
    return std::make_shared<TwoBranch>();
  }
  if (name == "resnet") return std::make_shared<ResNet>(2, checkpoint);
  if (name == "gpt") {
    GptConfig c = gpt;
    c.checkpoint = c.checkpoint || checkpoint;
    return std::make_shared<Gpt>(c);
  }
  throw ValueError("unknown model '" + name + "'; expected mlp, cnn, twobranch, resnet or gpt");
}

}  // namespace streamgrad

#include "tools/train_models.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "nn/init.h"

#include "engine/autocast.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/error.h"
#include "runtime/guard.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

using ModuleList = std::vector<std::shared_ptr<nn::Module>>;

Conv2dParams padded(int64_t p) {
  Conv2dParams c;
  c.padding = {p, p};
  return c;
}

std::shared_ptr<nn::Module> mlp() {
  return std::make_shared<nn::Sequential>(ModuleList{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 256),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 256),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10)});
}

std::shared_ptr<nn::Module> cnn() {
  return std::make_shared<nn::Sequential>(ModuleList{
      std::make_shared<nn::Conv2d>(1, 16, 3, padded(1)), std::make_shared<nn::BatchNorm2d>(16),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Conv2d>(16, 32, 3, padded(1)), std::make_shared<nn::BatchNorm2d>(32),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(32 * 7 * 7, 128),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.25),
      std::make_shared<nn::Linear>(128, 10)});
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
  const Stream main = current_stream(device);
  NoGradGuard no_grad;
  for (int i = 0; i < 2; ++i) {
    side_[i] = Stream::create(device);
    // Each branch's parameters are re-made on its stream: their gradients are produced
    // there, and a leaf accumulates .grad on the stream it was created on (S5), so a
    // parameter left on the caller's stream would cost a cross-stream wait per backward.
    side_[i].wait_stream(main);
    StreamGuard on_side(side_[i]);
    for (const Tensor& p : (i == 0 ? dense_ : conv_)->parameters()) {
      p.storage().record_stream(side_[i]);  // read there by the clone: not reused before (S8)
      p.set_data(streamgrad::clone(p.detach()));
    }
  }
  for (const Stream& s : side_) main.wait_stream(s);  // the optimiser updates them on main
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

std::shared_ptr<nn::Module> make_model(const std::string& name) {
  if (name == "mlp") return mlp();
  if (name == "cnn") return cnn();
  if (name == "twobranch") return std::make_shared<TwoBranch>();
  throw ValueError("unknown model '" + name + "'; expected mlp, cnn or twobranch");
}

Tensor amp_loss(nn::Module& model, const nn::Batch& batch, const AmpConfig& amp) {
  AutocastGuard autocast(amp.device_type, amp.dtype, amp.enabled);
  return cross_entropy(model.forward(batch.data), batch.target);
}

void backward_and_step(const Tensor& loss, nn::Optimizer& optimizer, const AmpConfig& amp) {
  if (amp.scaler == nullptr) {
    loss.backward();
    optimizer.step();
    return;
  }
  amp.scaler->scale(loss).backward();
  amp.scaler->step(optimizer);
  amp.scaler->update();
}

Tensor train_step(nn::Module& model, nn::Optimizer& optimizer, const nn::Batch& batch,
                  const AmpConfig& amp) {
  optimizer.zero_grad();
  const Tensor loss = amp_loss(model, batch, amp);
  backward_and_step(loss, optimizer, amp);
  return loss.detach();
}

AmpConfig amp_config(const std::string& flag, Device device) {
  AmpConfig c;
  c.device_type = device.type();
  if (flag == "off") return c;
  SG_CHECK(flag == "bf16" || flag == "fp16", ValueError, "unknown --amp=", flag,
           "; expected off, bf16 or fp16");
  SG_CHECK(flag == "bf16" || device.type() != DeviceType::kCpu, ValueError,
           "--amp=fp16 runs on sim and cuda devices; on cpu use --amp=bf16");
  c.enabled = true;
  c.dtype = flag == "bf16" ? DType::kBFloat16 : DType::kFloat16;
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

}  // namespace streamgrad

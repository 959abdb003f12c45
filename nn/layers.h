// The layers of torch::nn that training code uses most, each a Module with PyTorch's
// parameter names, shapes and default initialisation (so state dicts line up):
// Linear, Conv2d, ConvTranspose2d, BatchNorm2d, LayerNorm, GroupNorm, RMSNorm, Embedding,
// ReLU, GELU, SiLU, Identity, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Upsample, Flatten,
// Dropout, and the Sequential container (nn/containers.h: ModuleList, ModuleDict;
// nn/rnn.h: LSTMCell, LSTM).
//
//   auto net = std::make_shared<nn::Sequential>();
//   net->push_back(std::make_shared<nn::Conv2d>(1, 16, 3, Conv2dParams{{1, 1}, {1, 1}}));
//   net->push_back(std::make_shared<nn::ReLU>());
//   net->push_back(std::make_shared<nn::MaxPool2d>(2));
//   net->push_back(std::make_shared<nn::Flatten>());
//   net->push_back(std::make_shared<nn::Linear>(16 * 14 * 14, 10));
//   Tensor logits = net->forward(images);
//
// Dropout and BatchNorm2d follow the module's training flag (train()/eval()).
// Thread-safety and failure: as Module; forward throws what the underlying op throws.
#ifndef STREAMGRAD_NN_LAYERS_H_
#define STREAMGRAD_NN_LAYERS_H_

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "ops/ops.h"

namespace streamgrad {
namespace nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;
  Tensor weight, bias;  // [out, in], [out] (undefined without bias)
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
         const Conv2dParams& params = {}, bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;
  Tensor weight, bias;  // [out, in / groups, k, k], [out]
  Conv2dParams params;
};

// interpolate as a module (no parameters): Upsample(InterpolateOptions().scale_factor...).
class Upsample : public Module {
 public:
  explicit Upsample(InterpolateOptions options) : Module("Upsample"), options(std::move(options)) {}
  Tensor forward(const Tensor& input) override { return interpolate(input, options); }
  std::shared_ptr<Module> blank_copy() const override {
    return std::make_shared<Upsample>(options);
  }
  InterpolateOptions options;
};

// The transposed convolution (conv_transpose2d), initialised as the reference's (fan-in
// of the weight [in, out / groups, k, k] read from its dim 1).
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                  const ConvTranspose2dParams& params = {}, bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;
  Tensor weight, bias;  // [in, out / groups, k, k], [out]
  ConvTranspose2dParams params;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       bool affine = true);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;
  void copy_host_state(const Module& other) override;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double eps, momentum;

 protected:
  void state_loaded() override;

 private:
  int64_t batches_ = 0;  // mirrors num_batches_tracked
};

// Layer normalisation over the trailing dims named by normalized_shape (ops.h's
// layer_norm), as torch.nn.LayerNorm: with elementwise_affine, a weight of ones and (with
// bias) a bias of zeros of that shape, registered as "weight" and "bias".
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
  explicit LayerNorm(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true)
      : LayerNorm(Shape{normalized_size}, eps, elementwise_affine, bias) {}
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;
  Tensor weight, bias;  // normalized_shape, or undefined
  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
};

// Group normalisation (ops.h's group_norm), as torch.nn.GroupNorm: num_channels split into
// num_groups groups (ValueError unless it divides num_channels); with affine, a weight of
// ones and a bias of zeros of [num_channels], registered as "weight" and "bias".
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;
  Tensor weight, bias;  // [num_channels], or undefined
  int64_t num_groups, num_channels;
  double eps;
  bool affine;
};

// RMS normalisation (ops.h's rms_norm), as torch.nn.RMSNorm: a weight of ones of
// normalized_shape with elementwise_affine; eps unset is rms_norm's default (the machine
// epsilon it computes in).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  explicit RMSNorm(int64_t normalized_size, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true)
      : RMSNorm(Shape{normalized_size}, eps, elementwise_affine) {}
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;
  Tensor weight;
  Shape normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx = -1);
  Tensor forward(const Tensor& indices) override;
  std::shared_ptr<Module> blank_copy() const override;
  Tensor weight;
  int64_t padding_idx;
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override { return relu(input); }
  std::shared_ptr<Module> blank_copy() const override { return std::make_shared<ReLU>(); }
};

// The input itself (a placeholder, e.g. a residual block's shortcut without downsampling).
class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& input) override { return input; }
  std::shared_ptr<Module> blank_copy() const override { return std::make_shared<Identity>(); }
};

// gelu(input, approximate): "none" (exact, through erf) or "tanh".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override { return gelu(input, approximate); }
  std::shared_ptr<Module> blank_copy() const override {
    return std::make_shared<GELU>(approximate);
  }
  std::string approximate;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& input) override { return silu(input); }
  std::shared_ptr<Module> blank_copy() const override { return std::make_shared<SiLU>(); }
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size) : MaxPool2d(Pool2dParams{{kernel_size, kernel_size}}) {}
  explicit MaxPool2d(const Pool2dParams& params) : Module("MaxPool2d"), params(params) {}
  Tensor forward(const Tensor& input) override { return max_pool2d(input, params); }
  std::shared_ptr<Module> blank_copy() const override {
    return std::make_shared<MaxPool2d>(params);
  }
  Pool2dParams params;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel_size) : AvgPool2d(Pool2dParams{{kernel_size, kernel_size}}) {}
  explicit AvgPool2d(const Pool2dParams& params) : Module("AvgPool2d"), params(params) {}
  Tensor forward(const Tensor& input) override { return avg_pool2d(input, params); }
  std::shared_ptr<Module> blank_copy() const override {
    return std::make_shared<AvgPool2d>(params);
  }
  Pool2dParams params;
};

// The reference's nn::AdaptiveAvgPool2d: adaptive_avg_pool2d to a fixed [oh, ow] grid
// (one size for a square grid), whatever the input's height and width.
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(int64_t output_size)
      : AdaptiveAvgPool2d(std::array<int64_t, 2>{output_size, output_size}) {}
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size)
      : Module("AdaptiveAvgPool2d"), output_size(output_size) {}
  Tensor forward(const Tensor& input) override {
    return adaptive_avg_pool2d(input, output_size);
  }
  std::shared_ptr<Module> blank_copy() const override {
    return std::make_shared<AdaptiveAvgPool2d>(output_size);
  }
  std::array<int64_t, 2> output_size;
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override { return flatten(input, start_dim, end_dim); }
  std::shared_ptr<Module> blank_copy() const override {
    return std::make_shared<Flatten>(start_dim, end_dim);
  }
  int64_t start_dim, end_dim;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override { return dropout(input, p, is_training()); }
  std::shared_ptr<Module> blank_copy() const override;
  double p;
};

// Children named "0", "1", ...; forward feeds each one's output to the next.
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;
  size_t size() const { return layers_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_LAYERS_H_

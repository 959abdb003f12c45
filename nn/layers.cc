#include "nn/layers.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/init.h"
#include "nn/recompute.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace {

// PyTorch's default for Linear and Conv2d: kaiming_uniform_(a = sqrt(5)) on the weight,
// and the bias uniform in +-1 / sqrt(fan_in).
void default_init(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
  }
}

void check_positive(const char* module, const char* what, int64_t v) {
  SG_CHECK(v > 0, ValueError, module, ": ", what, " must be positive, got ", v);
}

// A convolution module's sizes: positive, and groups dividing both channel counts.
void check_conv_sizes(const char* module, int64_t in_channels, int64_t out_channels,
                      int64_t kernel_size, int64_t groups) {
  check_positive(module, "in_channels", in_channels);
  check_positive(module, "out_channels", out_channels);
  check_positive(module, "kernel_size", kernel_size);
  SG_CHECK(groups > 0 && in_channels % groups == 0 && out_channels % groups == 0, ValueError,
           module, ": groups ", groups, " must divide in_channels ", in_channels,
           " and out_channels ", out_channels);
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) : Module("Linear") {
  check_positive("Linear", "in_features", in_features);
  check_positive("Linear", "out_features", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", empty({out_features}));
  default_init(weight, bias);
}

Tensor Linear::forward(const Tensor& input) { return linear(input, weight, bias); }

std::shared_ptr<Module> Linear::blank_copy() const {
  init::NoInitGuard no_init;
  return std::make_shared<Linear>(weight.size(1), weight.size(0), bias.defined());
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
               const Conv2dParams& p, bool with_bias)
    : Module("Conv2d"), params(p) {
  check_conv_sizes("Conv2d", in_channels, out_channels, kernel_size, p.groups);
  weight = register_parameter(
      "weight", empty({out_channels, in_channels / p.groups, kernel_size, kernel_size}));
  if (with_bias) bias = register_parameter("bias", empty({out_channels}));
  default_init(weight, bias);
}

Tensor Conv2d::forward(const Tensor& input) { return conv2d(input, weight, bias, params); }

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                 const ConvTranspose2dParams& p, bool with_bias)
    : Module("ConvTranspose2d"), params(p) {
  check_conv_sizes("ConvTranspose2d", in_channels, out_channels, kernel_size, p.groups);
  weight = register_parameter(
      "weight", empty({in_channels, out_channels / p.groups, kernel_size, kernel_size}));
  if (with_bias) bias = register_parameter("bias", empty({out_channels}));
  default_init(weight, bias);
}

Tensor ConvTranspose2d::forward(const Tensor& input) {
  return conv_transpose2d(input, weight, bias, params);
}

std::shared_ptr<Module> ConvTranspose2d::blank_copy() const {
  init::NoInitGuard no_init;
  return std::make_shared<ConvTranspose2d>(weight.size(0), weight.size(1) * params.groups,
                                           weight.size(2), params, bias.defined());
}

std::shared_ptr<Module> Conv2d::blank_copy() const {
  init::NoInitGuard no_init;
  return std::make_shared<Conv2d>(weight.size(1) * params.groups, weight.size(0), weight.size(2),
                                  params, bias.defined());
}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps_, double momentum_, bool affine)
    : Module("BatchNorm2d"), eps(eps_), momentum(momentum_) {
  check_positive("BatchNorm2d", "num_features", num_features);
  if (affine) {
    weight = register_parameter("weight", ones({num_features}));
    bias = register_parameter("bias", zeros({num_features}));
  }
  running_mean = register_buffer("running_mean", zeros({num_features}));
  running_var = register_buffer("running_var", ones({num_features}));
  num_batches_tracked =
      register_buffer("num_batches_tracked", zeros({}, TensorOptions().dtype(DType::kInt64)));
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  SG_CHECK(input.dim() == 4, ValueError, "BatchNorm2d: expected a [N, C, H, W] input, got ",
           input.describe());
  if (is_training() && recomputing()) {
    // The forward being recomputed for backward has moved the statistics already; the
    // batch's own statistics give the same output without them (nn/recompute.h).
    return batch_norm(input, weight, bias, Tensor(), Tensor(), true, momentum, eps);
  }
  if (is_training()) {
    // Counted on the host and written with fill_ (asynchronous): reading the buffer back
    // would make every training step wait for the device. Only kept for state dicts
    // (PyTorch uses it for momentum=None, which this module does not offer).
    NoGradGuard no_grad;
    fill_(num_batches_tracked, static_cast<double>(++batches_));
  }
  return batch_norm(input, weight, bias, running_mean, running_var, is_training(), momentum, eps);
}

std::shared_ptr<Module> BatchNorm2d::blank_copy() const {
  return std::make_shared<BatchNorm2d>(running_mean.size(0), eps, momentum, weight.defined());
}

void BatchNorm2d::copy_host_state(const Module& other) {
  batches_ = dynamic_cast<const BatchNorm2d&>(other).batches_;
}

void BatchNorm2d::state_loaded() {
  // One host read per load: the counter must continue from the loaded count.
  batches_ = num_batches_tracked.item<int64_t>();
}

namespace {

void check_normalized_shape(const char* module, const Shape& shape) {
  SG_CHECK(!shape.empty(), ValueError, module, ": normalized_shape must name at least one dim");
  for (int64_t s : shape) check_positive(module, "every size of normalized_shape", s);
}

}  // namespace

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine, bool with_bias)
    : Module("LayerNorm"), normalized_shape(std::move(shape)), eps(eps_),
      elementwise_affine(affine) {
  check_normalized_shape("LayerNorm", normalized_shape);
  if (affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    if (with_bias) bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape, weight, bias, eps);
}

std::shared_ptr<Module> LayerNorm::blank_copy() const {
  return std::make_shared<LayerNorm>(normalized_shape, eps, elementwise_affine, bias.defined());
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps_, bool affine_)
    : Module("GroupNorm"), num_groups(groups), num_channels(channels), eps(eps_),
      affine(affine_) {
  check_positive("GroupNorm", "num_groups", num_groups);
  check_positive("GroupNorm", "num_channels", num_channels);
  SG_CHECK(num_channels % num_groups == 0, ValueError, "GroupNorm: num_channels ", num_channels,
           " must be divisible by num_groups ", num_groups);
  if (affine) {
    weight = register_parameter("weight", ones({num_channels}));
    bias = register_parameter("bias", zeros({num_channels}));
  }
}

Tensor GroupNorm::forward(const Tensor& input) {
  // Without affine any channel count divisible by num_groups passes, as in the reference.
  SG_CHECK(!affine || input.dim() < 2 || input.size(1) == num_channels, ValueError,
           "GroupNorm: input ", input.describe(), " must have num_channels ", num_channels,
           " in dim 1 ([N, ", num_channels, ", *])");
  return group_norm(input, num_groups, weight, bias, eps);
}

std::shared_ptr<Module> GroupNorm::blank_copy() const {
  return std::make_shared<GroupNorm>(num_groups, num_channels, eps, affine);
}

RMSNorm::RMSNorm(Shape shape, std::optional<double> eps_, bool affine)
    : Module("RMSNorm"), normalized_shape(std::move(shape)), eps(eps_), elementwise_affine(affine) {
  check_normalized_shape("RMSNorm", normalized_shape);
  if (affine) weight = register_parameter("weight", ones(normalized_shape));
}

Tensor RMSNorm::forward(const Tensor& input) {
  return rms_norm(input, normalized_shape, weight, eps);
}

std::shared_ptr<Module> RMSNorm::blank_copy() const {
  return std::make_shared<RMSNorm>(normalized_shape, eps, elementwise_affine);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding)
    : Module("Embedding"), padding_idx(padding) {
  check_positive("Embedding", "num_embeddings", num_embeddings);
  check_positive("Embedding", "embedding_dim", embedding_dim);
  SG_CHECK(padding < num_embeddings, ValueError, "Embedding: padding_idx ", padding,
           " is not below num_embeddings ", num_embeddings);
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  init::normal_(weight);
  if (padding >= 0) {
    NoGradGuard no_grad;
    Tensor row = narrow(weight, 0, padding, 1);
    zero_(row);
  }
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices, padding_idx); }

GELU::GELU(std::string approximate_) : Module("GELU"), approximate(std::move(approximate_)) {
  SG_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "GELU: approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
}

Dropout::Dropout(double p_) : Module("Dropout"), p(p_) {
  SG_CHECK(p >= 0 && p <= 1, ValueError, "Dropout: probability ", p, " must be in [0, 1]");
}

std::shared_ptr<Module> Dropout::blank_copy() const { return std::make_shared<Dropout>(p); }

std::shared_ptr<Module> Embedding::blank_copy() const {
  init::NoInitGuard no_init;
  return std::make_shared<Embedding>(weight.size(0), weight.size(1), padding_idx);
}

std::shared_ptr<Module> Sequential::blank_copy() const {
  auto copy = std::make_shared<Sequential>();
  for (const auto& layer : layers_) copy->push_back(layer->blank_copy());
  return copy;
}

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) : Sequential() {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  layers_.push_back(register_module(absl::StrCat(layers_.size()), std::move(module)));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& layer : layers_) x = layer->forward(x);
  return x;
}

}  // namespace nn
}  // namespace streamgrad

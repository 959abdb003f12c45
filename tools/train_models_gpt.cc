#include "tools/train_models_gpt.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/init.h"
#include "nn/recompute.h"
#include "ops/ops.h"
#include "runtime/backend/guard.h"
#include "runtime/base/error.h"
#include "runtime/runtime.h"
#include "tools/train_models.h"

namespace streamgrad {
namespace {

using Modules = std::vector<std::shared_ptr<nn::Module>>;

Conv2dParams conv_params(int64_t stride, int64_t padding) {
  Conv2dParams p;
  p.stride = {stride, stride};
  p.padding = {padding, padding};
  return p;
}

std::shared_ptr<nn::Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  auto c = std::make_shared<nn::Conv2d>(in, out, k, conv_params(stride, k / 2),
                                        /*bias=*/false);
  NoGradGuard no_grad;
  nn::init::kaiming_normal_(c->weight, 0, nn::init::FanMode::kFanOut,
                            nn::init::Nonlinearity::kRelu);
  return c;
}

class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : Module("BasicBlock"), in_(in), out_(out), stride_(stride) {
    conv1_ = register_module("conv1", conv(in, out, 3, stride));
    bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(out));
    conv2_ = register_module("conv2", conv(out, out, 3, 1));
    bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(out));
    if (stride != 1 || in != out) {
      downsample_ = register_module(
          "downsample", std::make_shared<nn::Sequential>(Modules{
                            conv(in, out, 1, stride), std::make_shared<nn::BatchNorm2d>(out)}));
    }
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = relu(bn1_->forward(conv1_->forward(x)));
    const Tensor y = bn2_->forward(conv2_->forward(h));
    return relu(add(y, downsample_ != nullptr ? downsample_->forward(x) : x));
  }
  std::shared_ptr<Module> blank_copy() const override {
    nn::init::NoInitGuard no_init;
    return std::make_shared<BasicBlock>(in_, out_, stride_);
  }

 private:
  int64_t in_, out_, stride_;
  std::shared_ptr<nn::Conv2d> conv1_, conv2_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<nn::Sequential> downsample_;
};

// x + attention(ln(x)) + mlp(ln(x)): the two branches read the same normalised input and
// nothing of each other, so they may run on two streams at once.
class ParallelBlock : public nn::Module {
 public:
  ParallelBlock(int64_t dim, int64_t heads, double dropout)
      : Module("ParallelBlock"), dim_(dim), heads_(heads), dropout_(dropout) {
    ln_ = register_module("ln", std::make_shared<nn::LayerNorm>(dim));
    attn_ = register_module("attn", std::make_shared<nn::MultiheadAttention>(
                                        dim, heads, dropout, true, /*batch_first=*/true));
    mlp_ = register_module(
        "mlp",
        std::make_shared<nn::Sequential>(Modules{
            std::make_shared<nn::Linear>(dim, 4 * dim), std::make_shared<nn::GELU>(),
            std::make_shared<nn::Linear>(4 * dim, dim), std::make_shared<nn::Dropout>(dropout)}));
  }
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  // `sides`: two streams for attention and the MLP, or null for the caller's stream.
  Tensor forward(const Tensor& x, const Stream* sides) {
    const Tensor h = ln_->forward(x);
    if (sides == nullptr) return add(add(x, attention(h)), mlp_->forward(h));
    const Stream main = current_stream(x.device());
    Tensor branch[2];
    // Both branches are forked before either is joined: a join then a fork would order the
    // second branch after the first.
    for (int i = 0; i < 2; ++i) {
      sides[i].wait_stream(main);
      h.storage().record_stream(sides[i]);  // read there: not reused before (S8)
      StreamGuard on_side(sides[i]);
      branch[i] = i == 0 ? attention(h) : mlp_->forward(h);
    }
    for (int i = 0; i < 2; ++i) {
      main.wait_stream(sides[i]);
      branch[i].storage().record_stream(main);
    }
    return add(add(x, branch[0]), branch[1]);
  }
  std::shared_ptr<Module> blank_copy() const override {
    nn::init::NoInitGuard no_init;
    return std::make_shared<ParallelBlock>(dim_, heads_, dropout_);
  }
  std::vector<Tensor> branch_parameters(int i) const {
    return i == 0 ? attn_->parameters() : mlp_->parameters();
  }

 private:
  Tensor attention(const Tensor& h) {
    return attn_
        ->forward(h, h, h, Tensor(), /*need_weights=*/false, Tensor(), true,
                  /*is_causal=*/true)
        .first;
  }
  int64_t dim_, heads_;
  double dropout_;
  std::shared_ptr<nn::LayerNorm> ln_;
  std::shared_ptr<nn::MultiheadAttention> attn_;
  std::shared_ptr<nn::Sequential> mlp_;
};

}  // namespace

Gpt::Gpt(const GptConfig& c) : Module("Gpt"), config_(c) {
  SG_CHECK(c.vocab >= 1 && c.context >= 1 && c.layers >= 0, ValueError, "Gpt: vocabulary ", c.vocab,
           ", context ", c.context, " and layers ", c.layers, " must be positive");
  SG_CHECK(c.heads >= 1 && c.dim % c.heads == 0, ValueError, "Gpt: --dim=", c.dim,
           " must be a multiple of --heads=", c.heads);
  wte_ = register_module("wte", std::make_shared<nn::Embedding>(c.vocab, c.dim));
  wpe_ = register_module("wpe", std::make_shared<nn::Embedding>(c.context, c.dim));
  {
    NoGradGuard no_grad;
    nn::init::normal_(wte_->weight, 0, 0.02);
    nn::init::normal_(wpe_->weight, 0, 0.02);
  }
  blocks_ = register_module("blocks", std::make_shared<nn::ModuleList>());
  const auto options = nn::TransformerOptions()
                           .dim_feedforward(4 * c.dim)
                           .dropout(c.dropout)
                           .activation("gelu")
                           .batch_first(true)
                           .norm_first(true);
  for (int64_t l = 0; l < c.layers; ++l) {
    if (c.parallel_blocks) {
      blocks_->push_back(std::make_shared<ParallelBlock>(c.dim, c.heads, c.dropout));
    } else {
      blocks_->push_back(std::make_shared<nn::TransformerEncoderLayer>(c.dim, c.heads, options));
    }
  }
  ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.dim));
}

Tensor Gpt::forward(const Tensor& tokens) {
  SG_CHECK(tokens.dim() == 2, ValueError, "Gpt: expected token ids [batch, time], got ",
           tokens.dim(), " dimensions");
  const int64_t t = tokens.size(1);
  SG_CHECK(t >= 1 && t <= config_.context, ValueError, "Gpt: a sequence of ", t,
           " tokens does not fit the context of ", config_.context);
  const Tensor positions =
      arange(static_cast<double>(t), TensorOptions().dtype(DType::kInt64).device(tokens.device()));
  Tensor x = add(wte_->forward(tokens), wpe_->forward(positions));
  for (const std::shared_ptr<nn::Module>& b : *blocks_) {
    // By value: a checkpointed block runs again in backward, after this call returned.
    const auto block = [b, parallel = config_.parallel_blocks,
                        side = two_streams_ ? side_ : nullptr](const Tensor& in) {
      if (parallel) return static_cast<ParallelBlock&>(*b).forward(in, side);
      return static_cast<nn::TransformerEncoderLayer&>(*b).forward(in, Tensor(), Tensor(),
                                                                   /*is_causal=*/true);
    };
    if (config_.checkpoint && grad_mode_enabled()) {
      x = nn::checkpoint([block](const TensorList& in) { return TensorList{block(in[0])}; },
                         {x})[0];
    } else {
      x = block(x);
    }
  }
  return linear(ln_f_->forward(x), wte_->weight);  // tied: logits [B, T, vocab]
}

void Gpt::use_streams(Device device, bool two_streams) {
  two_streams_ = two_streams && config_.parallel_blocks && !device.is_cpu();
  if (!two_streams_) return;
  side_[0] = Stream::create(device);
  side_[1] = Stream::create(device);
  for (const std::shared_ptr<nn::Module>& b : *blocks_) {
    const auto& block = static_cast<const ParallelBlock&>(*b);
    for (int i = 0; i < 2; ++i) make_parameters_on(block.branch_parameters(i), side_[i]);
  }
}

std::shared_ptr<nn::Module> Gpt::blank_copy() const {
  nn::init::NoInitGuard no_init;
  return std::make_shared<Gpt>(config_);
}

ResNet::ResNet(int64_t blocks, bool checkpoint)
    : Module("ResNet"), blocks_(blocks), checkpoint_(checkpoint) {
  SG_CHECK(blocks >= 1, ValueError, "ResNet: blocks per stage must be at least 1, got ", blocks);
  stem_ = register_module("stem", std::make_shared<nn::Sequential>(Modules{
                                      conv(1, 16, 3, 1), std::make_shared<nn::BatchNorm2d>(16),
                                      std::make_shared<nn::ReLU>()}));
  Modules stages;
  int64_t in = 16;
  for (const int64_t out : {16, 32, 64}) {
    for (int64_t b = 0; b < blocks; ++b) {
      stages.push_back(std::make_shared<BasicBlock>(in, out, b == 0 && out != 16 ? 2 : 1));
      in = out;
    }
  }
  stages_ = register_module("stages", std::make_shared<nn::Sequential>(stages));
  fc_ = register_module("fc", std::make_shared<nn::Linear>(64, 10));
}

Tensor ResNet::forward(const Tensor& images) {
  const Tensor stem = stem_->forward(images);
  const Tensor features =  // [B, 64, 7, 7]
      checkpoint_ && is_training() && grad_mode_enabled()
          ? nn::checkpoint_sequential(*stages_, static_cast<int>(stages_->size()), stem)
          : stages_->forward(stem);
  return fc_->forward(mean(features, {2, 3}));                       // global average pooling
}

std::shared_ptr<nn::Module> ResNet::blank_copy() const {
  nn::init::NoInitGuard no_init;
  return std::make_shared<ResNet>(blocks_, checkpoint_);
}

}  // namespace streamgrad

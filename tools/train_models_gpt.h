// The two modern models of tools/train (tools/train_models.h has the Fashion-MNIST ones):
//
//   Gpt     a decoder-only transformer on token ids [B, T] (int64), giving next-token
//           logits [B, T, vocab]: token and position embeddings (N(0, 0.02)), `layers`
//           pre-norm blocks of causal self-attention and a GELU MLP (4 x dim) with residual
//           connections (nn::TransformerEncoderLayer, norm_first, batch_first, dropout),
//           a final LayerNorm, and the output layer tied to the token embedding (its
//           weight is the embedding's: one parameter, two uses). With parallel_blocks each
//           block is instead x + attention(ln(x)) + mlp(ln(x)) (one norm, as GPT-J's), so
//           attention and MLP are independent, and use_streams runs them on two side
//           streams of the device (as TwoBranch's branches: tools/train_models.h), which
//           backward replays (S2).
//   ResNet  a small residual network on [B, 1, 28, 28] images: a 3x3 stem (16 channels,
//           batch norm, ReLU), three stages of `blocks` basic blocks each (16, 32, 64
//           channels; stages 2 and 3 open with a stride-2 block whose shortcut is a 1x1
//           strided convolution with batch norm), global average pooling, Linear 64-10.
//           A basic block is relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), its
//           convolutions 3x3 without bias; He (fan-out) initialisation of the
//           convolutions, as torchvision's ResNets. With `checkpoint` every basic block but
//           the last is recomputed in backward (nn::checkpoint_sequential over the stages).
//
// Thread-safety and failure: as nn::Module; the constructors throw ValueError for sizes
// that do not fit (dim not divisible by heads, a context or vocabulary below 1), and Gpt's
// forward for token sequences longer than its context.
#ifndef STREAMGRAD_TOOLS_TRAIN_MODELS_GPT_H_
#define STREAMGRAD_TOOLS_TRAIN_MODELS_GPT_H_

#include <cstdint>
#include <memory>

#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/transformer.h"

namespace streamgrad {

struct GptConfig {
  int64_t vocab = 0, context = 128, dim = 128, heads = 4, layers = 4;
  double dropout = 0.0;
  bool parallel_blocks = false;
  // Training forward keeps no block's saved tensors: each block is recomputed in backward
  // (nn::checkpoint, non-reentrant).
  bool checkpoint = false;
};

class Gpt : public nn::Module {
 public:
  explicit Gpt(const GptConfig& config);
  Tensor forward(const Tensor& tokens) override;
  std::shared_ptr<Module> blank_copy() const override;
  const GptConfig& config() const { return config_; }
  // parallel_blocks only: attention on one side stream of `device` and the MLP on another
  // (their parameters re-made there), or everything on the caller's stream.
  void use_streams(Device device, bool two_streams);

 private:
  GptConfig config_;
  bool two_streams_ = false;
  Stream side_[2] = {Stream::default_for(Device("cpu")), Stream::default_for(Device("cpu"))};
  std::shared_ptr<nn::Embedding> wte_, wpe_;
  std::shared_ptr<nn::ModuleList> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
};

class ResNet : public nn::Module {
 public:
  // Two basic blocks per stage by default: 92.9 % on Fashion-MNIST in 5 epochs where one
  // block per stage stops at about 92.2 % (bench/RESULTS.md).
  explicit ResNet(int64_t blocks = 2, bool checkpoint = false);
  Tensor forward(const Tensor& images) override;
  std::shared_ptr<Module> blank_copy() const override;

 private:
  int64_t blocks_;
  bool checkpoint_;
  std::shared_ptr<nn::Sequential> stem_, stages_;
  std::shared_ptr<nn::Linear> fc_;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_TRAIN_MODELS_GPT_H_

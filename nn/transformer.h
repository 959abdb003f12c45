// The attention layers of torch::nn, with the reference's parameter names, shapes,
// initialisation and options, built on scaled_dot_product_attention (ops.h):
//
//   MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first)
//     in_proj_weight [3E, E] (xavier-uniform), in_proj_bias [3E] (zeros), out_proj
//     (Linear E -> E, bias zeros). forward(query, key, value, ...) returns the output and,
//     with need_weights, the attention weights (averaged over heads unless asked not
//     to). Masks as the reference's: a bool attn_mask or key_padding_mask marks with true
//     the positions NOT to attend (the opposite of scaled_dot_product_attention's); a
//     float one is added to the scores. Without need_weights the fused attention kernels
//     run (O(L) kept for backward); with it the weights are materialised.
//   TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation
//     "relu" | "gelu", layer_norm_eps, batch_first, norm_first)
//     self_attn, linear1, linear2, norm1, norm2 and dropouts; norm_first is the pre-norm
//     block (x + sa(norm1(x)), then x + ff(norm2(x))), else post-norm.
//   TransformerDecoderLayer(d_model, nhead, options as the encoder's)
//     self_attn, multihead_attn (to the memory), linear1, linear2, norm1..3, dropouts;
//     pre-norm: x + sa(norm1(x)), x + mha(norm2(x), memory), x + ff(norm3(x)).
//
//   auto block = std::make_shared<nn::TransformerEncoderLayer>(
//       128, 4, nn::TransformerOptions().dim_feedforward(512).activation("gelu")
//                 .batch_first(true).norm_first(true));
//   Tensor y = block->forward(x, Tensor(), Tensor(), /*is_causal=*/true);   // [N, T, 128]
//
// Thread-safety: as Module. Failure: ValueError naming the layer for an embed_dim not
// divisible by num_heads, an unknown activation, inputs whose last dim is not embed_dim,
// or masks of the wrong shape; what the ops throw otherwise.
#ifndef STREAMGRAD_NN_TRANSFORMER_H_
#define STREAMGRAD_NN_TRANSFORMER_H_

#include <memory>
#include <string>
#include <utility>

#include "nn/layers.h"
#include "nn/options.h"

namespace streamgrad {
namespace nn {

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0,
                     bool bias = true, bool batch_first = false);
  // Self-attention of x (query, key and value), without weights.
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& key_padding_mask = Tensor(),
                                    bool need_weights = true, const Tensor& attn_mask = Tensor(),
                                    bool average_attn_weights = true, bool is_causal = false);
  std::shared_ptr<Module> blank_copy() const override;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
  int64_t embed_dim, num_heads;
  double dropout;
  bool batch_first;
};

struct TransformerOptions {
  SG_NN_OPTION(int64_t, dim_feedforward) = 2048;
  SG_NN_OPTION(double, dropout) = 0.1;
  SG_NN_OPTION(std::string, activation) = "relu";
  SG_NN_OPTION(double, layer_norm_eps) = 1e-5;
  SG_NN_OPTION(bool, batch_first) = false;
  SG_NN_OPTION(bool, norm_first) = false;
  SG_NN_OPTION(bool, bias) = true;
};

class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                          const TransformerOptions& options = TransformerOptions());
  Tensor forward(const Tensor& src) override { return forward(src, Tensor(), Tensor()); }
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                 bool is_causal = false);
  std::shared_ptr<Module> blank_copy() const override;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  int64_t d_model, nhead;
  TransformerOptions options;
};

// The decoder block (nn/transformer_decoder.cc): self-attention on tgt (causal with
// tgt_is_causal or a tgt_mask), attention from tgt to memory, and the feed-forward, each
// with a residual connection and LayerNorm (norm1..3), pre- or post-norm as the encoder.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead,
                          const TransformerOptions& options = TransformerOptions());
  // Self-attention only (memory = tgt), as a Module's one-input forward must be.
  Tensor forward(const Tensor& tgt) override { return forward(tgt, tgt); }
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool tgt_is_causal = false,
                 bool memory_is_causal = false);
  std::shared_ptr<Module> blank_copy() const override;
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;
  int64_t d_model, nhead;
  TransformerOptions options;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_TRANSFORMER_H_

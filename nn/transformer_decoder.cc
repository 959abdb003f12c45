// TransformerDecoderLayer (nn/transformer.h), with the reference's parameter names and
// block order: self-attention, attention to the memory, feed-forward.
#include "nn/transformer.h"
#include "nn/init.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model_, int64_t nhead_,
                                                 const TransformerOptions& o)
    : Module("TransformerDecoderLayer"), d_model(d_model_), nhead(nhead_), options(o) {
  SG_CHECK(o.activation() == "relu" || o.activation() == "gelu", ValueError,
           "TransformerDecoderLayer: activation must be \"relu\" or \"gelu\", got \"",
           o.activation(), "\"");
  const auto attention = [&] {
    return std::make_shared<MultiheadAttention>(d_model, nhead, o.dropout(), o.bias(),
                                                o.batch_first());
  };
  self_attn = register_module("self_attn", attention());
  multihead_attn = register_module("multihead_attn", attention());
  linear1 = register_module("linear1",
                            std::make_shared<Linear>(d_model, o.dim_feedforward(), o.bias()));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout()));
  linear2 = register_module("linear2",
                            std::make_shared<Linear>(o.dim_feedforward(), d_model, o.bias()));
  const auto norm = [&] {
    return std::make_shared<LayerNorm>(d_model, o.layer_norm_eps(), true, o.bias());
  };
  norm1 = register_module("norm1", norm());
  norm2 = register_module("norm2", norm());
  norm3 = register_module("norm3", norm());
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout()));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout()));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout()));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const Tensor& tgt_mask, const Tensor& memory_mask,
                                        const Tensor& tgt_key_padding_mask,
                                        const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                        bool memory_is_causal) {
  const auto sa = [&](const Tensor& x) {
    return dropout1->forward(self_attn
                                 ->forward(x, x, x, tgt_key_padding_mask, /*need_weights=*/false,
                                           tgt_mask, true, tgt_is_causal)
                                 .first);
  };
  const auto mha = [&](const Tensor& x) {
    return dropout2->forward(multihead_attn
                                 ->forward(x, memory, memory, memory_key_padding_mask,
                                           /*need_weights=*/false, memory_mask, true,
                                           memory_is_causal)
                                 .first);
  };
  const auto ff = [&](const Tensor& x) {
    const Tensor h = linear1->forward(x);
    return dropout3->forward(linear2->forward(
        dropout->forward(options.activation() == "gelu" ? gelu(h) : relu(h))));
  };
  if (options.norm_first()) {
    Tensor x = add(tgt, sa(norm1->forward(tgt)));
    x = add(x, mha(norm2->forward(x)));
    return add(x, ff(norm3->forward(x)));
  }
  Tensor x = norm1->forward(add(tgt, sa(tgt)));
  x = norm2->forward(add(x, mha(x)));
  return norm3->forward(add(x, ff(x)));
}

std::shared_ptr<Module> TransformerDecoderLayer::blank_copy() const {
  init::NoInitGuard no_init;
  return std::make_shared<TransformerDecoderLayer>(d_model, nhead, options);
}

}  // namespace nn
}  // namespace streamgrad

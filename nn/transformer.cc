#include "nn/transformer.h"

#include <cmath>
#include <limits>

#include "engine/factories.h"
#include "nn/init.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A mask of the reference's MultiheadAttention as additive floats of `dtype`: a bool one
// marks with true what must NOT be attended to.
Tensor blocked_as_floats(const Tensor& mask, DType dtype) {
  if (mask.dtype() != DType::kBool) {
    return mask.dtype() == dtype ? mask : streamgrad::to(mask, dtype);
  }
  return masked_fill(zeros(mask.sizes(), TensorOptions().dtype(dtype).device(mask.device())), mask,
                     -kInf);
}

// [N, T, E] -> [N, H, T, E / H].
Tensor split_heads(const Tensor& x, int64_t heads) {
  return transpose(reshape(x, {x.size(0), x.size(1), heads, x.size(2) / heads}), 1, 2);
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, double dropout_,
                                       bool bias, bool batch_first_)
    : Module("MultiheadAttention"),
      embed_dim(embed_dim_),
      num_heads(num_heads_),
      dropout(dropout_),
      batch_first(batch_first_) {
  SG_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, ValueError,
           "MultiheadAttention: embed_dim ", embed_dim, " must be a positive multiple of "
           "num_heads ", num_heads);
  SG_CHECK(dropout >= 0 && dropout < 1, ValueError, "MultiheadAttention: dropout ", dropout,
           " must be in [0, 1)");
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}));
  if (bias) in_proj_bias = register_parameter("in_proj_bias", empty({3 * embed_dim}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias));
  init::xavier_uniform_(in_proj_weight);
  if (bias) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  return forward(x, x, x, Tensor(), /*need_weights=*/false).first;
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                      const Tensor& value,
                                                      const Tensor& key_padding_mask,
                                                      bool need_weights, const Tensor& attn_mask,
                                                      bool average_attn_weights, bool is_causal) {
  for (const Tensor* t : {&query, &key, &value}) {
    SG_CHECK(t->defined() && t->dim() == 3 && t->size(2) == embed_dim, ValueError,
             "MultiheadAttention: expected query, key and value of 3 dims ending in embed_dim ",
             embed_dim, " (", batch_first ? "[N, L, E]" : "[L, N, E]", "), got ",
             t->defined() ? t->describe() : std::string("an undefined tensor"));
  }
  const Tensor q_in = batch_first ? query : transpose(query, 0, 1);
  const Tensor k_in = batch_first ? key : transpose(key, 0, 1);
  const Tensor v_in = batch_first ? value : transpose(value, 0, 1);
  const int64_t n = q_in.size(0), l = q_in.size(1), s = k_in.size(1), e = embed_dim;
  const auto proj = [&](const Tensor& x, int64_t part) {
    const Tensor w = narrow(in_proj_weight, 0, part * e, e);
    const Tensor b = in_proj_bias.defined() ? narrow(in_proj_bias, 0, part * e, e) : Tensor();
    return split_heads(linear(x, w, b), num_heads);
  };
  Tensor q, k, v;  // [N, H, T, Dh]
  if (query.is_same(key) && key.is_same(value)) {
    // Self-attention: one projection (as the reference's packed path), so the input gets
    // one gradient from it rather than three to add up.
    const std::vector<Tensor> qkv = chunk(linear(q_in, in_proj_weight, in_proj_bias), 3, -1);
    q = split_heads(qkv[0], num_heads);
    k = split_heads(qkv[1], num_heads);
    v = split_heads(qkv[2], num_heads);
  } else {
    q = proj(q_in, 0);
    k = proj(k_in, 1);
    v = proj(v_in, 2);
  }
  Tensor mask;
  if (attn_mask.defined()) {
    mask = blocked_as_floats(attn_mask, q.dtype());
    if (mask.dim() == 3) mask = reshape(mask, {n, num_heads, l, s});  // [N * H, L, S]
  }
  if (key_padding_mask.defined()) {
    SG_CHECK(key_padding_mask.dim() == 2 && key_padding_mask.size(0) == n &&
                 key_padding_mask.size(1) == s,
             ValueError, "MultiheadAttention: key_padding_mask must be [", n, ", ", s, "], got ",
             key_padding_mask.describe());
    const Tensor pad = reshape(blocked_as_floats(key_padding_mask, q.dtype()), {n, 1, 1, s});
    mask = mask.defined() ? add(mask, pad) : pad;
  }
  const bool causal = is_causal && !mask.defined();
  if (is_causal && mask.defined()) {
    std::vector<double> c(static_cast<size_t>(l * s));
    for (int64_t i = 0; i < l; ++i) {
      for (int64_t j = 0; j < s; ++j) c[static_cast<size_t>(i * s + j)] = j <= i ? 0 : -kInf;
    }
    mask = add(mask, streamgrad::to(from_vector(c, {l, s}, TensorOptions()
                                                                .dtype(DType::kFloat64)
                                                                .device(q.device())),
                                    mask.dtype()));
  }
  const double p = is_training() ? dropout : 0.0;
  Tensor out, weights;
  if (need_weights) {  // the weights are wanted: materialised
    Tensor scores = mul(matmul(q, transpose(k, -2, -1)),
                        1.0 / std::sqrt(static_cast<double>(e / num_heads)));
    if (mask.defined()) scores = add(scores, mask);
    if (causal) {
      std::vector<bool> hide;
      for (int64_t i = 0; i < l; ++i) {
        for (int64_t j = 0; j < s; ++j) hide.push_back(j > i);
      }
      scores = masked_fill(scores, from_vector(hide, {l, s}, TensorOptions().device(q.device())),
                           -kInf);
    }
    weights = softmax(scores, -1);
    out = matmul(p > 0 ? streamgrad::dropout(weights, p, true) : weights, v);
    if (average_attn_weights) weights = mean(weights, {1});
  } else {
    out = scaled_dot_product_attention(q, k, v, mask, p, causal);
  }
  out = out_proj->forward(reshape(transpose(out, 1, 2), {n, l, e}));
  return {batch_first ? out : transpose(out, 0, 1), weights};
}

std::shared_ptr<Module> MultiheadAttention::blank_copy() const {
  init::NoInitGuard no_init;
  return std::make_shared<MultiheadAttention>(embed_dim, num_heads, dropout,
                                              in_proj_bias.defined(), batch_first);
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model_, int64_t nhead_,
                                                 const TransformerOptions& o)
    : Module("TransformerEncoderLayer"), d_model(d_model_), nhead(nhead_), options(o) {
  SG_CHECK(o.activation() == "relu" || o.activation() == "gelu", ValueError,
           "TransformerEncoderLayer: activation must be \"relu\" or \"gelu\", got \"",
           o.activation(), "\"");
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(
                                               d_model, nhead, o.dropout(), o.bias(),
                                               o.batch_first()));
  linear1 = register_module("linear1",
                            std::make_shared<Linear>(d_model, o.dim_feedforward(), o.bias()));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout()));
  linear2 = register_module("linear2",
                            std::make_shared<Linear>(o.dim_feedforward(), d_model, o.bias()));
  norm1 = register_module("norm1",
                          std::make_shared<LayerNorm>(d_model, o.layer_norm_eps(), true, o.bias()));
  norm2 = register_module("norm2",
                          std::make_shared<LayerNorm>(d_model, o.layer_norm_eps(), true, o.bias()));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout()));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout()));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask, bool is_causal) {
  const auto sa = [&](const Tensor& x) {
    return dropout1->forward(self_attn
                                 ->forward(x, x, x, src_key_padding_mask, /*need_weights=*/false,
                                           src_mask, true, is_causal)
                                 .first);
  };
  const auto ff = [&](const Tensor& x) {
    const Tensor h = linear1->forward(x);
    return dropout2->forward(linear2->forward(
        dropout->forward(options.activation() == "gelu" ? gelu(h) : relu(h))));
  };
  if (options.norm_first()) {
    const Tensor x = add(src, sa(norm1->forward(src)));
    return add(x, ff(norm2->forward(x)));
  }
  const Tensor x = norm1->forward(add(src, sa(src)));
  return norm2->forward(add(x, ff(x)));
}

std::shared_ptr<Module> TransformerEncoderLayer::blank_copy() const {
  init::NoInitGuard no_init;
  return std::make_shared<TransformerEncoderLayer>(d_model, nhead, options);
}

}  // namespace nn
}  // namespace streamgrad

// The streamgrad side of the GPT step of bench/gpt_common.h, as its users write it by hand
// (raw parameters, layer_norm, linear, gelu, cross_entropy), with the attention either
// fused (scaled_dot_product_attention, causal: O(T) kept for backward) or composed as the
// reference's documentation writes it out (matmul, scale, causal mask, softmax, matmul:
// the T x T probabilities kept for backward). sg_bench --case=gpt times the fused one;
// bench/attention_memory compares the two's memory.
//
// Thread-safety: as the ops. Failure: what the ops throw.
#ifndef STREAMGRAD_BENCH_GPT_STEP_H_
#define STREAMGRAD_BENCH_GPT_STEP_H_

#include <cmath>
#include <limits>
#include <vector>

#include "bench/gpt_common.h"
#include "streamgrad.h"

namespace streamgrad {
namespace bench {

struct GptInputs {
  std::vector<Tensor> params;  // gpt_shapes' order, requiring grad
  Tensor x, positions, y;      // [B, T], [T], [B * T] int64
};

inline GptInputs gpt_inputs(const GptConfig& g) {
  GptInputs in;
  const std::vector<std::vector<int64_t>> shapes = gpt_shapes(g);
  const std::vector<std::vector<float>> init = gpt_init(g);
  for (size_t i = 0; i < shapes.size(); ++i) {
    in.params.push_back(
        from_vector(init[i], Shape(shapes[i].begin(), shapes[i].end())).requires_grad_());
  }
  std::vector<int64_t> xs, ys, pos(static_cast<size_t>(g.context));
  gpt_tokens(g, &xs, &ys);
  for (int64_t i = 0; i < g.context; ++i) pos[static_cast<size_t>(i)] = i;
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64);
  in.x = from_vector(xs, {g.batch, g.context}, i64);
  in.y = from_vector(ys, {g.batch * g.context}, i64);
  in.positions = from_vector(pos, {g.context}, i64);
  return in;
}

// softmax(q k^T / sqrt(d) + causal mask) v, every step an op of its own.
inline Tensor composed_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t t = q.size(2);
  std::vector<float> mask(static_cast<size_t>(t * t), 0.0f);
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = i + 1; j < t; ++j) {
      mask[static_cast<size_t>(i * t + j)] = -std::numeric_limits<float>::infinity();
    }
  }
  const Tensor scores = mul(matmul(q, transpose(k, 2, 3)), 1.0 / std::sqrt(double(q.size(3))));
  return matmul(softmax(add(scores, from_vector(mask, {t, t})), -1), v);
}

inline Tensor gpt_loss(const GptConfig& g, const GptInputs& in, bool fused_attention) {
  const std::vector<Tensor>& p = in.params;
  const int64_t b = g.batch, t = g.context, c = g.dim, h = g.heads;
  Tensor hid = add(embedding(p[0], in.x), embedding(p[1], in.positions));
  for (int64_t l = 0; l < g.layers; ++l) {
    const Tensor* w = &p[static_cast<size_t>(2 + l * kGptBlockParams)];
    const Tensor a = layer_norm(hid, {c}, w[0], w[1]);
    const Tensor qkv = linear(a, w[2], w[3]);
    const auto heads = [&](int64_t part) {
      return transpose(reshape(narrow(qkv, 2, part * c, c), {b, t, h, c / h}), 1, 2);
    };
    const Tensor att =
        fused_attention
            ? scaled_dot_product_attention(heads(0), heads(1), heads(2), Tensor(), 0.0, true)
            : composed_causal_attention(heads(0), heads(1), heads(2));
    hid = add(hid, linear(reshape(transpose(att, 1, 2), {b, t, c}), w[4], w[5]));
    const Tensor m = layer_norm(hid, {c}, w[6], w[7]);
    hid = add(hid, linear(gelu(linear(m, w[8], w[9])), w[10], w[11]));
  }
  const size_t last = p.size() - 2;
  const Tensor out = layer_norm(hid, {c}, p[last], p[last + 1]);
  const Tensor logits = matmul(out, transpose(p[0], 0, 1));  // the tied head
  return cross_entropy(reshape(logits, {b * t, g.vocab}), in.y);
}

}  // namespace bench
}  // namespace streamgrad

#endif  // STREAMGRAD_BENCH_GPT_STEP_H_

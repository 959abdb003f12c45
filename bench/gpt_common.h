// The GPT training step of bench/run.sh, shared by both sides (sg_bench_gpt.cc,
// torch_bench_gpt.cc), so that each builds the same model from the same numbers: a
// decoder-only transformer as its users write it by hand (token and position embeddings,
// pre-norm blocks of causal self-attention and a GELU MLP, a final layer norm, the head
// tied to the token embedding), trained with AdamW on random tokens. The figures
// are for 2 blocks, dim 128, 4 heads, context 64, batch 16.
//
// Parameters, in order: wte [V, C], wpe [T, C], then per block ln1 weight and bias [C],
// attention in-projection [3C, C] and bias [3C], out-projection [C, C] and bias [C], ln2
// weight and bias [C], MLP [4C, C] and [4C], [C, 4C] and [C]; then the final norm's weight
// and bias [C]. Matrices are uniform in +-1/sqrt(fan_in), embeddings in +-0.1, norm
// weights 1 and biases 0.
//
// Thread-safety: pure functions. Failure: none.
#ifndef STREAMGRAD_BENCH_GPT_COMMON_H_
#define STREAMGRAD_BENCH_GPT_COMMON_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "bench/bench_common.h"

namespace streamgrad {
namespace bench {

struct GptConfig {
  int64_t vocab = 96, context = 64, dim = 128, heads = 4, layers = 2, batch = 16;
};

constexpr int kGptBlockParams = 12;

inline std::vector<std::vector<int64_t>> gpt_shapes(const GptConfig& g) {
  const int64_t c = g.dim;
  std::vector<std::vector<int64_t>> s = {{g.vocab, c}, {g.context, c}};
  for (int64_t l = 0; l < g.layers; ++l) {
    const std::vector<std::vector<int64_t>> block = {
        {c}, {c}, {3 * c, c}, {3 * c}, {c, c}, {c}, {c}, {c}, {4 * c, c}, {4 * c}, {c, 4 * c}, {c}};
    s.insert(s.end(), block.begin(), block.end());
  }
  s.push_back({c});
  s.push_back({c});
  return s;
}

inline std::vector<std::vector<float>> gpt_init(const GptConfig& g) {
  const std::vector<std::vector<int64_t>> shapes = gpt_shapes(g);
  std::vector<std::vector<float>> out(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t n = 1;
    for (int64_t v : shapes[i]) n *= v;
    out[i].assign(static_cast<size_t>(n), 0.0f);
    const bool embedding = i < 2;
    const bool matrix = shapes[i].size() == 2;
    const size_t in_block = i < 2 ? 0 : (i - 2) % kGptBlockParams;
    const bool final_norm_weight = i + 2 == shapes.size();
    const bool block_norm_weight =
        i >= 2 && i + 2 < shapes.size() && (in_block == 0 || in_block == 6);
    const bool norm_weight = final_norm_weight || block_norm_weight;
    if (norm_weight) {
      out[i].assign(static_cast<size_t>(n), 1.0f);
    } else if (embedding || matrix) {
      SplitMix64 rng(2000 + i);
      const float bound = embedding ? 0.1f : 1.0f / std::sqrt(static_cast<float>(shapes[i][1]));
      for (float& x : out[i]) x = (2 * rng.uniform() - 1) * bound;
    }
  }
  return out;
}

// Tokens x [B, T] and targets y [B, T] (uniform over the vocabulary).
inline void gpt_tokens(const GptConfig& g, std::vector<int64_t>* x, std::vector<int64_t>* y) {
  SplitMix64 rng(17);
  const size_t n = static_cast<size_t>(g.batch * g.context);
  x->resize(n);
  y->resize(n);
  for (size_t i = 0; i < n; ++i) {
    (*x)[i] = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(g.vocab));
    (*y)[i] = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(g.vocab));
  }
}

}  // namespace bench
}  // namespace streamgrad

#endif  // STREAMGRAD_BENCH_GPT_COMMON_H_

#include "tools/train_generate.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

// One draw from softmax(logits / temperature) restricted to the top_k largest
// logits.
int64_t draw(std::vector<float> logits, const SampleOptions& o, std::mt19937_64& rng) {
  const size_t n = logits.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  const size_t keep = o.top_k > 0 ? std::min(n, static_cast<size_t>(o.top_k)) : n;
  // Ties keep the lower id first, so a draw does not depend on the sort's
  // whims.
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [&](size_t a, size_t b) {
                      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                    });
  const double top = logits[order[0]] / o.temperature;
  std::vector<double> weights(keep);
  for (size_t i = 0; i < keep; ++i) weights[i] = std::exp(logits[order[i]] / o.temperature - top);
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  return static_cast<int64_t>(order[pick(rng)]);
}

}  // namespace

std::string generate(Gpt& model, const nn::CharVocab& vocab, const std::string& prompt,
                     const SampleOptions& o, Device device) {
  SG_CHECK(o.temperature > 0, ValueError, "--temperature must be above 0, got ", o.temperature);
  SG_CHECK(o.top_k >= 0, ValueError, "--top-k must be 0 (every character) or more, got ", o.top_k);
  std::string start = prompt;
  if (start.empty()) {
    start = vocab.symbols().find('\n') != std::string::npos ? "\n" : vocab.symbols().substr(0, 1);
  }
  std::vector<int64_t> ids = vocab.encode(start);
  std::mt19937_64 rng(o.seed);
  const int64_t context = model.config().context;
  NoGradGuard no_grad;
  model.eval();
  for (int64_t i = 0; i < o.chars; ++i) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(ids.size()), context);
    const std::vector<int64_t> window(ids.end() - n, ids.end());
    const Tensor x =
        from_vector(window, {1, n}, TensorOptions().dtype(DType::kInt64).device(device));
    const Tensor logits = narrow(model.forward(x), 1, n - 1, 1);  // [1, 1, vocab]
    ids.push_back(draw(logits.to(DType::kFloat32).to_vector<float>(), o, rng));
  }
  model.train();
  return vocab.decode(ids);
}

}  // namespace streamgrad

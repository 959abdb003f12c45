// tools/train's gpt and resnet models (tools/train_models_gpt.h): shapes, the tied output
// layer (one parameter, gradients from both uses), causality (a position's logits never
// depend on later tokens), the context limit, and blank copies for DataParallel.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/factories.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tools/train_models_gpt.h"

namespace streamgrad {
namespace {

std::map<std::string, Tensor> by_name(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, p] : m.named_parameters()) out[name] = p;
  return out;
}

GptConfig tiny() {
  GptConfig c;
  c.vocab = 11;
  c.context = 8;
  c.dim = 16;
  c.heads = 2;
  c.layers = 2;
  return c;
}

Tensor tokens(const std::vector<int64_t>& ids, int64_t batch) {
  return from_vector(ids, {batch, static_cast<int64_t>(ids.size()) / batch},
                     TensorOptions().dtype(DType::kInt64));
}

TEST_CASE("gpt: logits per position, the output layer tied to the token embedding",
          "[train][gpt]") {
  manual_seed(1);
  Gpt model(tiny());
  const Tensor logits = model.forward(tokens({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 2));
  CHECK(logits.sizes() == Shape({2, 5, 11}));
  // wte, wpe, 2 blocks of 12, ln_f's 2: no separate output matrix.
  CHECK(model.parameters().size() == 2 + 2 * 12 + 2);
  const Tensor wte = by_name(model).at("wte.weight");
  sum(logits).backward();
  // Rows of tokens that never occur still get gradient through the output layer.
  const std::vector<float> g = wte.grad().to_vector<float>();
  const int64_t unused_row = 0;
  double norm = 0;
  for (int64_t j = 0; j < 16; ++j) norm += std::abs(g[static_cast<size_t>(unused_row * 16 + j)]);
  CHECK(norm > 0);
}

TEST_CASE("gpt: a position's logits do not depend on later tokens", "[train][gpt]") {
  manual_seed(2);
  Gpt model(tiny());
  model.eval();
  const std::vector<float> a = model.forward(tokens({1, 2, 3, 4, 5, 6}, 1)).to_vector<float>();
  const std::vector<float> b = model.forward(tokens({1, 2, 3, 9, 9, 9}, 1)).to_vector<float>();
  for (size_t i = 0; i < 3 * 11; ++i) CHECK(a[i] == b[i]);  // positions 0..2
  bool later_differs = false;
  for (size_t i = 3 * 11; i < a.size(); ++i) later_differs |= a[i] != b[i];
  CHECK(later_differs);
}

TEST_CASE("gpt: sizes that do not fit are refused", "[train][gpt][errors]") {
  GptConfig c = tiny();
  c.heads = 3;
  REQUIRE_THROWS_WITH(Gpt(c), Catch::Contains("must be a multiple of --heads=3"));
  Gpt model(tiny());
  REQUIRE_THROWS_WITH(model.forward(tokens(std::vector<int64_t>(9, 1), 1)),
                      Catch::Contains("does not fit the context of 8"));
}

TEST_CASE("resnet: 10 logits per image, and a blank copy of the same shapes", "[train][resnet]") {
  manual_seed(3);
  ResNet model;
  const Tensor x = randn({2, 1, 28, 28});
  CHECK(model.forward(x).sizes() == Shape({2, 10}));
  const auto copy = model.blank_copy();
  const auto a = by_name(model), b = by_name(*copy);
  REQUIRE(a.size() == b.size());
  for (const auto& [name, p] : a) CHECK(b.at(name).sizes() == p.sizes());
  // Two blocks per stage; the first block of each stride-2 stage has a 1x1 projection
  // shortcut, no other block does.
  for (int i = 0; i < 6; ++i) {
    const std::string stage = "stages." + std::to_string(i);
    CHECK(a.count(stage + ".conv1.weight") == 1);
    CHECK(a.count(stage + ".downsample.0.weight") == (i == 2 || i == 4 ? 1u : 0u));
  }
  CHECK(a.count("stages.6.conv1.weight") == 0);
  CHECK(a.at("stages.2.downsample.0.weight").sizes() == Shape({32, 16, 1, 1}));
}

TEST_CASE("resnet: blocks per stage", "[train][resnet]") {
  const auto count = [](const nn::Module& m) {
    int64_t n = 0;
    for (const auto& p : m.parameters()) n += p.numel();
    return n;
  };
  const ResNet one(1), two, three(3);
  CHECK(count(one) < count(two));
  CHECK(count(two) < count(three));
  CHECK(by_name(one).count("stages.2.downsample.0.weight") == 1);  // 16, 32, 64: one each
  REQUIRE_THROWS_WITH(ResNet(0), Catch::Contains("blocks per stage must be at least 1"));
}

}  // namespace
}  // namespace streamgrad

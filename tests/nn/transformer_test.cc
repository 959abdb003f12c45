// MultiheadAttention, TransformerEncoderLayer and TransformerDecoderLayer against the
// reference's definitions, written out here with ops: parameter names, shapes and initialisation, the output with
// and without weights, masks (bool true = blocked, as the reference's MultiheadAttention),
// causal, batch-first or not, pre- and post-norm blocks.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/init.h"
#include "nn/transformer.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

std::vector<std::string> names(const nn::NamedTensors& list) {
  std::vector<std::string> out;
  for (const auto& [n, t] : list) out.push_back(n);
  return out;
}

void check_close(const Tensor& a, const Tensor& b, double tol = 1e-5) {
  REQUIRE(a.sizes() == b.sizes());
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).margin(tol));
}

// The reference's attention, by hand: [N, L, E] batch-first inputs, an additive mask
// [L, S] (or undefined).
Tensor by_hand(const nn::MultiheadAttention& m, const Tensor& q_in, const Tensor& kv_in,
               const Tensor& mask) {
  const int64_t e = m.embed_dim, h = m.num_heads, dh = e / h;
  const auto proj = [&](const Tensor& x, int64_t part) {
    const Tensor y = add(matmul(x, transpose(narrow(m.in_proj_weight, 0, part * e, e), 0, 1)),
                         narrow(m.in_proj_bias, 0, part * e, e));
    return transpose(reshape(y, {x.size(0), x.size(1), h, dh}), 1, 2);
  };
  const Tensor q = proj(q_in, 0), k = proj(kv_in, 1), v = proj(kv_in, 2);
  Tensor s = mul(matmul(q, transpose(k, 2, 3)), 1 / std::sqrt(double(dh)));
  if (mask.defined()) s = add(s, mask);
  const Tensor o =
      reshape(transpose(matmul(softmax(s, -1), v), 1, 2), {q_in.size(0), q_in.size(1), e});
  return add(matmul(o, transpose(m.out_proj->weight, 0, 1)), m.out_proj->bias);
}

TEST_CASE("MultiheadAttention: the reference's parameters and initialisation",
          "[nn][transformer]") {
  manual_seed(1);
  nn::MultiheadAttention m(8, 2);
  CHECK(names(m.named_parameters()) == std::vector<std::string>{
                                           "in_proj_weight", "in_proj_bias", "out_proj.weight",
                                           "out_proj.bias"});
  CHECK(m.in_proj_weight.sizes() == Shape({24, 8}));
  const double bound = std::sqrt(6.0 / (8 + 24));  // xavier-uniform over [3E, E]
  for (float w : m.in_proj_weight.to_vector<float>()) CHECK(std::abs(w) <= bound);
  for (float b : m.in_proj_bias.to_vector<float>()) CHECK(b == 0);
  for (float b : m.out_proj->bias.to_vector<float>()) CHECK(b == 0);
  REQUIRE_THROWS_WITH(nn::MultiheadAttention(10, 3), Catch::Contains("multiple of num_heads"));
}

TEST_CASE("MultiheadAttention computes the reference's attention", "[nn][transformer]") {
  manual_seed(2);
  nn::MultiheadAttention m(8, 2, 0.0, true, /*batch_first=*/true);
  nn::init::normal_(m.in_proj_bias, 0, 0.1);  // not all zero, so that the bias is checked
  const Tensor x = randn({3, 5, 8}), mem = randn({3, 6, 8});
  const auto [out, w] = m.forward(x, mem, mem);
  check_close(out, by_hand(m, x, mem, Tensor()));
  CHECK(w.sizes() == Shape({3, 5, 6}));
  for (float r : sum(w, {-1}).to_vector<float>()) CHECK(r == Approx(1).margin(1e-6));
  // Without weights the fused kernels run, with the same result.
  const auto [fused, none] = m.forward(x, mem, mem, Tensor(), /*need_weights=*/false);
  CHECK_FALSE(none.defined());
  check_close(fused, out);
  CHECK(m.forward(x, mem, mem, Tensor(), true, Tensor(), false).second.sizes() ==
        Shape({3, 2, 5, 6}));
  // Not batch-first: [L, N, E] in and out, the same numbers.
  nn::MultiheadAttention seq(8, 2);
  seq.load_state_dict(m.state_dict());
  check_close(transpose(seq.forward(transpose(x, 0, 1), transpose(mem, 0, 1),
                                    transpose(mem, 0, 1)).first, 0, 1),
              out);
}

TEST_CASE("MultiheadAttention masks: bool true is blocked; causal; key padding",
          "[nn][transformer]") {
  manual_seed(3);
  nn::MultiheadAttention m(4, 1, 0.0, true, true);
  const Tensor x = randn({2, 4, 4});
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<bool> blocked;
  std::vector<double> additive;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      blocked.push_back(j > i);
      additive.push_back(j > i ? -inf : 0);
    }
  }
  const Tensor want = by_hand(m, x, x, from_vector(additive, {4, 4}).to(DType::kFloat32));
  check_close(m.forward(x, x, x, Tensor(), false, from_vector(blocked, {4, 4})).first, want);
  check_close(m.forward(x, x, x, Tensor(), true, from_vector(blocked, {4, 4})).first, want);
  check_close(m.forward(x, x, x, Tensor(), false, Tensor(), true, /*is_causal=*/true).first,
              want);
  // Key padding: batch 1 ignores its last key.
  const Tensor pad = from_vector(std::vector<bool>{false, false, false, false, false, false,
                                                   false, true},
                                 {2, 4});
  const Tensor padded = m.forward(x, x, x, pad, false).first;
  check_close(narrow(padded, 0, 0, 1), narrow(by_hand(m, x, x, Tensor()), 0, 0, 1));
  const Tensor x1 = narrow(x, 0, 1, 1);
  check_close(narrow(padded, 0, 1, 1), by_hand(m, x1, narrow(x1, 1, 0, 3), Tensor()));
}

TEST_CASE("TransformerEncoderLayer: names, pre- and post-norm blocks, gradients",
          "[nn][transformer]") {
  manual_seed(4);
  const bool norm_first = GENERATE(false, true);
  INFO("norm_first " << norm_first);
  nn::TransformerEncoderLayer layer(
      8, 2, nn::TransformerOptions().dim_feedforward(16).activation("gelu").batch_first(true)
                .norm_first(norm_first));
  CHECK(names(layer.named_parameters()) ==
        std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                 "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                 "linear1.weight", "linear1.bias", "linear2.weight",
                                 "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight",
                                 "norm2.bias"});
  layer.eval();  // dropout off
  const Tensor x = randn({2, 5, 8});
  const auto sa = [&](const Tensor& t) { return by_hand(*layer.self_attn, t, t, Tensor()); };
  const auto ff = [&](const Tensor& t) {
    return layer.linear2->forward(gelu(layer.linear1->forward(t)));
  };
  const auto n1 = [&](const Tensor& t) { return layer.norm1->forward(t); };
  const auto n2 = [&](const Tensor& t) { return layer.norm2->forward(t); };
  Tensor want;
  if (norm_first) {
    const Tensor h = add(x, sa(n1(x)));
    want = add(h, ff(n2(h)));
  } else {
    const Tensor h = n1(add(x, sa(x)));
    want = n2(add(h, ff(h)));
  }
  check_close(layer.forward(x), want);
  layer.train();
  sum(layer.forward(x)).backward();
  for (const auto& [name, p] : layer.named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  CHECK(layer.clone()->named_parameters().size() == 12);
  REQUIRE_THROWS_WITH(
      nn::TransformerEncoderLayer(8, 2, nn::TransformerOptions().activation("tanh")),
      Catch::Contains("\"relu\" or \"gelu\""));
}


TEST_CASE("TransformerDecoderLayer: names, causal self-attention, memory, pre and post norm",
          "[nn][transformer]") {
  manual_seed(5);
  const bool norm_first = GENERATE(false, true);
  INFO("norm_first " << norm_first);
  nn::TransformerDecoderLayer layer(
      8, 2, nn::TransformerOptions().dim_feedforward(16).batch_first(true).norm_first(norm_first));
  CHECK(names(layer.named_parameters()) ==
        std::vector<std::string>{
            "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
            "self_attn.out_proj.bias", "multihead_attn.in_proj_weight",
            "multihead_attn.in_proj_bias", "multihead_attn.out_proj.weight",
            "multihead_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
            "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
            "norm3.weight", "norm3.bias"});
  layer.eval();  // dropout off
  const Tensor tgt = randn({2, 4, 8}), memory = randn({2, 6, 8});
  std::vector<float> causal(16, 0.0f);
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) causal[static_cast<size_t>(i * 4 + j)] = -INFINITY;
  }
  const Tensor mask = from_vector(causal, {4, 4});
  const auto sa = [&](const Tensor& t) { return by_hand(*layer.self_attn, t, t, mask); };
  const auto mha = [&](const Tensor& t) {
    return by_hand(*layer.multihead_attn, t, memory, Tensor());
  };
  const auto ff = [&](const Tensor& t) {
    return layer.linear2->forward(relu(layer.linear1->forward(t)));
  };
  Tensor want;
  if (norm_first) {
    Tensor h = add(tgt, sa(layer.norm1->forward(tgt)));
    h = add(h, mha(layer.norm2->forward(h)));
    want = add(h, ff(layer.norm3->forward(h)));
  } else {
    Tensor h = layer.norm1->forward(add(tgt, sa(tgt)));
    h = layer.norm2->forward(add(h, mha(h)));
    want = layer.norm3->forward(add(h, ff(h)));
  }
  const Tensor got = layer.forward(tgt, memory, Tensor(), Tensor(), Tensor(), Tensor(),
                                   /*tgt_is_causal=*/true);
  check_close(got, want);
  // The same through a bool tgt_mask (true = blocked), as the reference's.
  check_close(layer.forward(tgt, memory, lt(mask, 0.0)), want);
  layer.train();
  sum(layer.forward(tgt, memory)).backward();
  for (const auto& [name, p] : layer.named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  CHECK(layer.clone()->named_parameters().size() == 18);
  REQUIRE_THROWS_WITH(
      nn::TransformerDecoderLayer(8, 2, nn::TransformerOptions().activation("tanh")),
      Catch::Contains("TransformerDecoderLayer: activation"));
}

}  // namespace
}  // namespace streamgrad

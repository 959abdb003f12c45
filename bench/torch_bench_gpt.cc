// torch_bench's GPT training step (bench/gpt_common.h), as a libtorch 1.13 user writes it:
// raw parameters, F::layer_norm, F::linear, attention as matmul, a causal masked_fill,
// softmax and matmul (1.13's C++ API has no scaled_dot_product_attention), F::gelu,
// F::cross_entropy and AdamW; the same phases as sg_bench_gpt.cc.
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "bench/bench_report.h"
#include "bench/gpt_common.h"

namespace streamgrad {
namespace bench {

void run_gpt(const Flags& f, Report& r) {
  namespace F = torch::nn::functional;
  using torch::Tensor;
  const GptConfig g;
  const int64_t b = g.batch, t = g.context, c = g.dim, h = g.heads;
  std::vector<std::vector<float>> init = gpt_init(g);
  const std::vector<std::vector<int64_t>> shapes = gpt_shapes(g);
  std::vector<Tensor> p;
  for (size_t i = 0; i < shapes.size(); ++i) {
    p.push_back(torch::from_blob(init[i].data(), shapes[i]).clone().requires_grad_());
  }
  std::vector<int64_t> xs, ys;
  gpt_tokens(g, &xs, &ys);
  const Tensor x = torch::from_blob(xs.data(), {b, t}, torch::kLong).clone();
  const Tensor y = torch::from_blob(ys.data(), {b * t}, torch::kLong).clone();
  const Tensor positions = torch::arange(t, torch::kLong);
  const Tensor causal = torch::ones({t, t}, torch::kBool).tril();
  const double scale = 1.0 / std::sqrt(static_cast<double>(c / h));
  const auto loss_of = [&]() {
    Tensor hid = F::embedding(x, p[0]) + F::embedding(positions, p[1]);
    for (int64_t l = 0; l < g.layers; ++l) {
      const Tensor* w = &p[2 + l * kGptBlockParams];
      const auto ln = [&](const Tensor& in, const Tensor& wt, const Tensor& bs) {
        return F::layer_norm(in, F::LayerNormFuncOptions({c}).weight(wt).bias(bs));
      };
      const Tensor qkv = F::linear(ln(hid, w[0], w[1]), w[2], w[3]);
      const auto heads = [&](int64_t part) {
        return qkv.narrow(2, part * c, c).view({b, t, h, c / h}).transpose(1, 2);
      };
      Tensor att = heads(0).matmul(heads(1).transpose(-2, -1)) * scale;
      att = att.masked_fill(causal.logical_not(), -INFINITY).softmax(-1);
      const Tensor y_att = att.matmul(heads(2)).transpose(1, 2).reshape({b, t, c});
      hid = hid + F::linear(y_att, w[4], w[5]);
      hid = hid + F::linear(F::gelu(F::linear(ln(hid, w[6], w[7]), w[8], w[9])), w[10], w[11]);
    }
    const size_t last = p.size() - 2;
    const Tensor out = F::layer_norm(
        hid, F::LayerNormFuncOptions({c}).weight(p[last]).bias(p[last + 1]));
    const Tensor logits = out.matmul(p[0].t());  // the tied head
    return F::cross_entropy(logits.reshape({b * t, g.vocab}), y);
  };
  torch::optim::AdamW opt(p, torch::optim::AdamWOptions(3e-4).weight_decay(0.01));
  {
    torch::NoGradGuard no_grad;
    r.set_check(loss_of().item<float>(), 0);
  }
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    const double t0 = now_ms();
    Tensor loss = loss_of();
    const double t1 = now_ms();
    loss.backward();
    const double t2 = now_ms();
    opt.step();
    opt.zero_grad();
    loss = Tensor();
    const double t3 = now_ms();
    if (rep < f.warmup) continue;
    r.add("fwd", t1 - t0, 0);
    r.add("bwd", t2 - t1, 0);
    r.add("optim", t3 - t2, 0);
    r.add("total", t3 - t0, 0);
  }
}

}  // namespace bench
}  // namespace streamgrad

namespace streamgrad {
namespace bench {

// --case=attention, as sg_bench's run_attention, written as a libtorch 1.13 user writes
// causal attention (its C++ API has no fused one): matmul, scale, masked_fill, softmax,
// matmul.
void run_attention(const Flags& f, Report& r) {
  using torch::Tensor;
  const std::vector<int64_t> shape = {f.batch, kAttentionHeads, f.n, kAttentionDim};
  const int64_t numel = f.batch * kAttentionHeads * f.n * kAttentionDim;
  std::vector<float> values = attention_input(f);
  const Tensor all = torch::from_blob(values.data(), {3 * numel}).clone();
  const auto part = [&](int64_t i) {
    return all.narrow(0, i * numel, numel).reshape(shape).detach().requires_grad_();
  };
  const Tensor q = part(0), k = part(1), v = part(2);
  const Tensor g = torch::ones(shape);
  const Tensor hidden = torch::ones({f.n, f.n}, torch::kBool).tril().logical_not();
  const double scale = 1.0 / std::sqrt(static_cast<double>(kAttentionDim));
  const auto attend = [&]() {
    const Tensor att = (q.matmul(k.transpose(-2, -1)) * scale).masked_fill(hidden, -INFINITY);
    return att.softmax(-1).matmul(v);
  };
  {
    torch::NoGradGuard no_grad;
    const Tensor y = attend();
    r.set_check((y * y).sum().item<double>(), 0);
  }
  time_forward_backward<torch::NoGradGuard>(
      f.warmup, f.reps, r, [&]() { return attend(); },
      [&]() {
        const Tensor y = attend();
        return torch::autograd::grad({y}, {q, k, v}, {g});
      });
}

}  // namespace bench
}  // namespace streamgrad

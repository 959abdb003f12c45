// sg_bench's GPT training step (bench/gpt_common.h), written as a streamgrad user writes
// it: raw parameters, layer_norm, linear, scaled_dot_product_attention (causal), gelu,
// cross_entropy and AdamW. Phases as the model steps': fwd, bwd, optim, total; the check is
// the loss before training.
#include <vector>

#include "bench/gpt_common.h"
#include "bench/sg_bench.h"

namespace streamgrad {
namespace bench {

void run_gpt(const Flags& f, Report& r) {
  SG_CHECK(Device(f.device).is_cpu(), ValueError, "sg_bench --case=gpt runs on cpu only");
  const GptConfig g;
  const int64_t b = g.batch, t = g.context, c = g.dim, h = g.heads;
  std::vector<Tensor> p;
  const std::vector<std::vector<int64_t>> shapes = gpt_shapes(g);
  const std::vector<std::vector<float>> init = gpt_init(g);
  for (size_t i = 0; i < shapes.size(); ++i) {
    p.push_back(from_vector(init[i], Shape(shapes[i].begin(), shapes[i].end()))
                    .requires_grad_());
  }
  std::vector<int64_t> xs, ys, pos(static_cast<size_t>(t));
  gpt_tokens(g, &xs, &ys);
  for (int64_t i = 0; i < t; ++i) pos[static_cast<size_t>(i)] = i;
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64);
  const Tensor x = from_vector(xs, {b, t}, i64), y = from_vector(ys, {b * t}, i64);
  const Tensor positions = from_vector(pos, {t}, i64);
  const auto loss_of = [&]() {
    Tensor hid = add(embedding(p[0], x), embedding(p[1], positions));
    for (int64_t l = 0; l < g.layers; ++l) {
      const Tensor* w = &p[2 + l * kGptBlockParams];
      const Tensor a = layer_norm(hid, {c}, w[0], w[1]);
      const Tensor qkv = linear(a, w[2], w[3]);
      const auto heads = [&](int64_t part) {
        return transpose(reshape(narrow(qkv, 2, part * c, c), {b, t, h, c / h}), 1, 2);
      };
      const Tensor att =
          scaled_dot_product_attention(heads(0), heads(1), heads(2), Tensor(), 0.0, true);
      hid = add(hid, linear(reshape(transpose(att, 1, 2), {b, t, c}), w[4], w[5]));
      const Tensor m = layer_norm(hid, {c}, w[6], w[7]);
      hid = add(hid, linear(gelu(linear(m, w[8], w[9])), w[10], w[11]));
    }
    const size_t last = p.size() - 2;
    const Tensor out = layer_norm(hid, {c}, p[last], p[last + 1]);
    const Tensor logits = matmul(out, transpose(p[0], 0, 1));  // the tied head
    return cross_entropy(reshape(logits, {b * t, g.vocab}), y);
  };
  nn::AdamW opt(p, nn::AdamOptions(3e-4).weight_decay(0.01));
  {
    NoGradGuard no_grad;
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

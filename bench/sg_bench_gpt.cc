// sg_bench's GPT training step (bench/gpt_common.h, bench/gpt_step.h), written as a
// streamgrad user writes it: raw parameters, layer_norm, linear,
// scaled_dot_product_attention (causal), gelu, cross_entropy and AdamW. Phases as the
// model steps': fwd, bwd, optim, total; the check is the loss before training.
#include <vector>

#include "bench/gpt_step.h"
#include "bench/sg_bench.h"

namespace streamgrad {
namespace bench {

void run_gpt(const Flags& f, Report& r) {
  SG_CHECK(Device(f.device).is_cpu(), ValueError, "sg_bench --case=gpt runs on cpu only");
  const GptConfig g;
  const GptInputs in = gpt_inputs(g);
  const std::vector<Tensor>& p = in.params;
  const auto loss_of = [&]() { return gpt_loss(g, in, /*fused_attention=*/true); };
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

namespace streamgrad {
namespace bench {

// --case=attention: the fused causal scaled_dot_product_attention without history ("fwd")
// and forward plus backward to q, k and v ("fwd_bwd"). Check: the sum of the output's
// squares.
void run_attention(const Flags& f, Report& r) {
  const Shape shape = {f.batch, kAttentionHeads, f.n, kAttentionDim};
  const int64_t numel = f.batch * kAttentionHeads * f.n * kAttentionDim;
  const Tensor all = from_vector(attention_input(f), {3 * numel});
  const auto part = [&](int64_t i) {
    return reshape(narrow(all, 0, i * numel, numel), shape).detach().requires_grad_();
  };
  const Tensor q = part(0), k = part(1), v = part(2);
  const Tensor g = ones(shape);
  const auto attend = [&]() { return scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true); };
  {
    NoGradGuard no_grad;
    const Tensor y = attend();
    r.set_check(sum(mul(y, y)).item<double>(), 0);
  }
  time_forward_backward<NoGradGuard>(
      f.warmup, f.reps, r, [&]() { return attend(); },
      [&]() {
        const Tensor y = attend();
        return grad({y}, {q, k, v}, {g});
      });
}

}  // namespace bench
}  // namespace streamgrad

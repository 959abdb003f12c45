// scaled_dot_product_attention, as the reference's torch.nn.functional one:
// softmax(q k^T * scale + mask) v over the last two dims, with a causal (top-left) or a
// bool (true: take part) or additive float mask, dropout on the probabilities, and scale
// 1 / sqrt(E) by default.
//
// Without dropout it is one fused kernel each way (kernels/nn_kernels.h): the forward keeps
// the output and each row's log-sum-exp, never the [L, S] probabilities, so what backward
// holds grows as O(L), and the backward recomputes the probabilities from them. With
// dropout it is the composite of matmul, softmax and dropout (the reference's math path;
// the probabilities are kept). Under create_graph the backward is written with ops, so it
// is differentiable again.
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_join.h"
#include "engine/grad_mode.h"
#include "kernels/nn_kernels.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

constexpr const char* kOp = "scaled_dot_product_attention";

// The causal mask as additive floats: 0 where key j <= query i, -inf above.
Tensor causal_mask(int64_t l, int64_t s, DType dtype, Device device) {
  std::vector<double> m(static_cast<size_t>(l * s));
  for (int64_t i = 0; i < l; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      m[static_cast<size_t>(i * s + j)] = j <= i ? 0.0 : -std::numeric_limits<double>::infinity();
    }
  }
  return to(from_vector(m, {l, s}, TensorOptions().dtype(DType::kFloat64).device(device)), dtype);
}

// The user's mask as additive floats of `dtype`: a bool mask's false becomes -inf.
Tensor additive(const Tensor& mask, DType dtype) {
  if (mask.dtype() != DType::kBool) return mask.dtype() == dtype ? mask : to(mask, dtype);
  return masked_fill(zeros(mask.sizes(), TensorOptions().dtype(dtype).device(mask.device())),
                     eq(mask, 0.0), -std::numeric_limits<double>::infinity());
}

struct AttentionBackward final : Node {
  std::string name() const override { return "ScaledDotProductAttentionBackward"; }
  TensorList apply(TensorList&& grads) override {
    TensorList out(3);
    if (!grads[0].defined()) return out;
    const Tensor g = contiguous(grads[0]);
    const Tensor qv = q.unpack(kOp), kv = k.unpack(kOp), vv = v.unpack(kOp);
    const Tensor mv = mask.unpack(kOp);
    if (grad_mode_enabled()) {  // create_graph: the same formulas as ops
      Tensor s = mul(matmul(qv, transpose(kv, 1, 2)), scale);
      if (mv.defined()) s = add(s, mv);
      if (causal) s = add(s, causal_mask(qv.size(1), kv.size(1), s.dtype(), s.device()));
      const Tensor p = softmax(s, -1);
      if (needs_grad(*this, 2)) out[2] = matmul(transpose(p, 1, 2), g);
      const Tensor dp = matmul(g, transpose(vv, 1, 2));
      const Tensor ds = mul(mul(p, sub(dp, sum(mul(dp, p), {-1}, true))), scale);
      if (needs_grad(*this, 0)) out[0] = matmul(ds, kv);
      if (needs_grad(*this, 1)) out[1] = matmul(transpose(ds, 1, 2), qv);
      return out;
    }
    const Tensor o = result.unpack(kOp), l = lse.unpack(kOp);
    for (int i = 0; i < 3; ++i) {
      if (needs_grad(*this, i)) {
        const Tensor& like = i == 0 ? qv : i == 1 ? kv : vv;
        out[i] = new_output(like.sizes(), like.dtype(), like.device());
      }
    }
    const kernels::View gq = out[0].defined() ? out[0].view() : kernels::View();
    const kernels::View gk = out[1].defined() ? out[1].view() : kernels::View();
    const kernels::View gv = out[2].defined() ? out[2].view() : kernels::View();
    const kernels::View mview = mv.defined() ? mv.view() : kernels::View();
    kernels::attention_backward(stream_of(g), out[0].defined() ? &gq : nullptr,
                                out[1].defined() ? &gk : nullptr,
                                out[2].defined() ? &gv : nullptr, g.view(), qv.view(), kv.view(),
                                vv.view(), o.view(), l.view(), mv.defined() ? &mview : nullptr,
                                causal, scale);
    return out;
  }
  void release_variables() override {
    q.reset();
    k.reset();
    v.reset();
    mask.reset();
    result.reset();
    lse.reset();
  }
  SavedTensor q, k, v, mask, result, lse;
  bool causal = false;
  double scale = 1;
};

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  for (const auto& [t, what] : {std::pair<const Tensor*, const char*>{&query, "query"},
                                {&key, "key"}, {&value, "value"}}) {
    check_defined(*t, kOp, what);
  }
  check_floating(query, kOp);
  check_same_dtype(query, key, kOp);
  check_same_dtype(query, value, kOp);
  check_same_device(query, key, kOp);
  check_same_device(query, value, kOp);
  const int64_t rank = query.dim();
  const auto batch_of = [](const Tensor& t) {
    return Shape(t.sizes().begin(), t.sizes().end() - 2);
  };
  SG_CHECK(rank >= 2 && key.dim() == rank && value.dim() == rank &&
               batch_of(key) == batch_of(query) && batch_of(value) == batch_of(query) &&
               key.size(-1) == query.size(-1) && value.size(-2) == key.size(-2),
           ValueError, kOp, ": expected query [..., L, E], key [..., S, E] and value [..., S, Ev] "
           "with the same batch dims, got ", query.describe(), ", ", key.describe(), " and ",
           value.describe());
  SG_CHECK(!(is_causal && attn_mask.defined()), ValueError, kOp,
           ": pass either attn_mask or is_causal=true, not both (fold the causal rule into the "
           "mask)");
  SG_CHECK(dropout_p >= 0 && dropout_p < 1, ValueError, kOp, ": dropout_p must be in [0, 1), got ",
           dropout_p);
  const int64_t l = query.size(-2), s = key.size(-2), e = query.size(-1), ev = value.size(-1);
  const double sc = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(e));
  Shape out_shape = batch_of(query);
  int64_t bh = 1;
  for (int64_t b : out_shape) bh *= b;
  out_shape.push_back(l);
  out_shape.push_back(ev);
  Tensor mask;
  if (attn_mask.defined()) {
    check_same_device(query, attn_mask, kOp);
    const DType mdt = is_reduced_floating(query.dtype()) && attn_mask.dtype() == DType::kFloat32
                          ? DType::kFloat32
                          : query.dtype();
    mask = additive(attn_mask, mdt);
    Shape full = batch_of(query);
    full.push_back(l);
    full.push_back(s);
    (void)broadcast_shapes(mask.sizes(), full, kOp);  // the mask must broadcast to the scores
    bool shared = true;  // every head sees the same [L, S]
    for (int64_t d = 0; d + 2 < mask.dim(); ++d) shared = shared && mask.size(d) == 1;
    mask = shared ? contiguous(expand(reshape(mask, mask.dim() >= 2 ? Shape{mask.size(-2),
                                                                            mask.size(-1)}
                                                                      : mask.sizes()),
                                      {l, s}))
                  : reshape(contiguous(expand(mask, full)), {bh, l, s});
  }
  if (dropout_p > 0) {  // the composite: the probabilities are kept, as the math path does
    Tensor scores = mul(matmul(query, transpose(key, -2, -1)), sc);
    if (mask.defined()) {
      scores = add(scores, mask.dim() == 2 ? mask : reshape(mask, scores.sizes()));
    }
    if (is_causal) scores = add(scores, causal_mask(l, s, scores.dtype(), scores.device()));
    return matmul(dropout(softmax(scores, -1), dropout_p, true), value);
  }
  const Tensor q3 = reshape(contiguous(query), {bh, l, e});
  const Tensor k3 = reshape(contiguous(key), {bh, s, e});
  const Tensor v3 = reshape(contiguous(value), {bh, s, ev});
  Tensor out = new_output({bh, l, ev}, query.dtype(), query.device());
  const DType lse_dtype = is_reduced_floating(query.dtype()) ? DType::kFloat32 : query.dtype();
  Tensor lse = new_output({bh, l}, lse_dtype, query.device());
  const kernels::View mview = mask.defined() ? mask.view() : kernels::View();
  kernels::attention_forward(stream_of(out), out.view(), lse.view(), q3.view(), k3.view(),
                             v3.view(), mask.defined() ? &mview : nullptr, is_causal, sc);
  if (any_requires_grad({q3, k3, v3})) {
    auto node = std::make_shared<AttentionBackward>();
    node->q = SavedTensor(q3);
    node->k = SavedTensor(k3);
    node->v = SavedTensor(v3);
    node->mask = SavedTensor(mask);
    node->lse = SavedTensor(lse);
    node->result = SavedTensor(out);
    node->causal = is_causal;
    node->scale = sc;
    wire(node, {q3, k3, v3}, {out});
    node->result.mark_output_of(node, 0);
  }
  return reshape(out, out_shape);
}

}  // namespace streamgrad

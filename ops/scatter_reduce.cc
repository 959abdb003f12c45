// scatter_reduce along a dim, as the reference's torch.scatter_reduce (out of place):
// self with each src element combined into the position index names, by sum, product,
// mean, max (amax) or min (amin); with include_self false self's values at the positions
// that index reaches take no part.
//
// The forward is one kernel (kernels::scatter_reduce: the identity first where self is
// left out, then the combine), plus a division by the counts for "mean". The backward
// follows the reference's formulas, written with differentiable ops (gather, scatter_add,
// scatter, where, and scatter_reduce itself for "prod"), so it is differentiable again:
//   sum   self: g;  src: g gathered
//   mean  both divided by the number of values each position averages
//   amax / amin  g shared evenly among every value equal to the result, self's and src's
//   prod  the product of the others, computed without dividing by a zero; as in the
//         reference, differentiating src's gradient again is an error where two or more
//         zeros of src meet at one position
// and with include_self false self's gradient is zero where index reaches.
// One deliberate difference: for amax / amin with include_self false the reference still
// counts an excluded self value equal to the result when it shares out g (so src's share
// is halved, though self took no part: pytorch/pytorch's scatter_reduce_backward); here
// only the values that took part share it, which is what central differences give.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

constexpr const char* kOp = "scatter_reduce";

enum class ReduceKind { kSum, kProd, kMean, kAmax, kAmin };

ReduceKind parse_reduce(const std::string& reduce) {
  if (reduce == "sum") return ReduceKind::kSum;
  if (reduce == "prod") return ReduceKind::kProd;
  if (reduce == "mean") return ReduceKind::kMean;
  if (reduce == "amax") return ReduceKind::kAmax;
  if (reduce == "amin") return ReduceKind::kAmin;
  throw ValueError(absl::StrCat(kOp, ": reduce must be one of \"sum\", \"prod\", \"mean\", ",
                                "\"amax\" or \"amin\", got \"", reduce, "\""));
}

kernels::IndexCombine combine_of(ReduceKind r) {
  switch (r) {
    case ReduceKind::kProd: return kernels::IndexCombine::kMultiply;
    case ReduceKind::kAmax: return kernels::IndexCombine::kMax;
    case ReduceKind::kAmin: return kernels::IndexCombine::kMin;
    case ReduceKind::kSum:
    case ReduceKind::kMean: break;
  }
  return kernels::IndexCombine::kAdd;
}

// How many values each position of a tensor shaped like `like` averages under "mean":
// self's where it is included, plus each src element index sends there; at least 1 (a
// position nothing reaches keeps self's value). No history.
Tensor counts(const Tensor& like, int64_t d, const Tensor& index, bool include_self) {
  NoGradGuard no_grad;
  const TensorOptions o = TensorOptions().dtype(like.dtype()).device(like.device());
  const Tensor n = scatter_add(full(like.sizes(), include_self ? 1.0 : 0.0, o), d, index,
                               ones(index.sizes(), o));
  return clamp_min(n, 1.0);
}

// Stands behind src's gradient for "prod" where two zeros of src meet at one position and
// the backward is recorded (create_graph): that gradient is not differentiable there, so
// reaching it again is the error, as in the reference.
struct ScatterReduceProdDoubleBackward final : Node {
  std::string name() const override { return "ScatterReduceProdDoubleBackward"; }
  TensorList apply(TensorList&&) override {
    throw Error(absl::StrCat(
        kOp, ": the gradient of src for reduce \"prod\" cannot be differentiated again where "
        "more than one zero of src is scattered to the same position (as in the reference); "
        "take the second derivative with respect to self only, or keep such zeros apart"));
  }
};

Tensor once_differentiable(const Tensor& g) {
  if (!g.requires_grad()) return g;
  auto node = std::make_shared<ScatterReduceProdDoubleBackward>();
  node->set_next_edges(collect_next_edges({g}));
  Tensor out = g.detach();
  set_history(out, node);
  return out;
}

struct ScatterReduceBackward final : Node {
  std::string name() const override { return "ScatterReduceBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor()};
    const Tensor idx = index.unpack("ScatterReduceBackward");
    const bool want_self = needs_grad(*this, 0), want_src = needs_grad(*this, 1);
    Tensor gs, gsrc;
    switch (reduction) {
      case ReduceKind::kSum:
        gs = g;
        if (want_src) gsrc = gather(g, dim, idx);
        break;
      case ReduceKind::kMean:
        gs = div(g, counts(g, dim, idx, include_self));
        if (want_src) gsrc = gather(gs, dim, idx);
        break;
      case ReduceKind::kAmax:
      case ReduceKind::kAmin:
        extreme(g, idx, &gs, &gsrc);
        break;
      case ReduceKind::kProd:
        product(g, idx, want_self, want_src, &gs, &gsrc);
        break;
    }
    if (want_self && !include_self) gs = scatter(gs, dim, idx, 0.0);
    return {want_self ? gs : Tensor(), want_src ? gsrc : Tensor()};
  }

  // g shared evenly among the values equal to the result that took part.
  void extreme(const Tensor& g, const Tensor& idx, Tensor* gs, Tensor* gsrc) {
    const Tensor x = self.unpack("ScatterReduceBackward");
    const Tensor s = src.unpack("ScatterReduceBackward");
    const Tensor r = result.unpack("ScatterReduceBackward");
    Tensor self_is = to(eq(x, r), g.dtype());
    if (!include_self) self_is = scatter(self_is, dim, idx, 0.0);
    const Tensor src_is = to(eq(s, gather(r, dim, idx)), g.dtype());
    // At least one value equals the result wherever it is not NaN; a NaN result sends
    // nothing back (every share is 0), and the clamp keeps 0 / 0 out.
    const Tensor share = clamp_min(scatter_add(self_is, dim, idx, src_is), 1.0);
    const Tensor each = div(g, share);
    *gs = mul(self_is, each);
    *gsrc = mul(src_is, gather(each, dim, idx));
  }

  // The product of the other values at each position, never dividing by a zero.
  void product(const Tensor& g, const Tensor& idx, bool want_self, bool want_src, Tensor* gs,
               Tensor* gsrc) {
    const Tensor x = self.unpack("ScatterReduceBackward");
    const Tensor s = src.unpack("ScatterReduceBackward");
    if (want_self) {
      // self's zeros replaced by 1: the product over the others, then divided by self.
      const Tensor x1 = masked_fill(x, eq(x, 0.0), 1.0);
      *gs = div(mul(g, scatter_reduce(x1, dim, idx, s, "prod", include_self)), x1);
    }
    if (!want_src) return;
    const Tensor r = result.unpack("ScatterReduceBackward");
    const Tensor zero = eq(s, 0.0);
    const Tensor zeros_there =
        gather(scatter_add(zeros_like(x), dim, idx, to(zero, x.dtype())), dim, idx);
    // A zero of src alone at its position: its gradient is the product of the others,
    // computed with it replaced by 1. Elsewhere result / src (0 where src is 0 and another
    // zero meets it).
    const Tensor lone = where(zero, eq(zeros_there, 1.0), zero);
    const Tensor without = scatter_reduce(x, dim, idx, masked_fill(s, lone, 1.0), "prod",
                                          include_self);
    *gsrc = where(lone, gather(mul(g, without), dim, idx),
                  div(gather(mul(g, r), dim, idx), masked_fill(s, zero, 1.0)));
    if (grad_mode_enabled() && any(gt(zeros_there, 1.0)).item<bool>()) {
      *gsrc = once_differentiable(*gsrc);
    }
  }

  void release_variables() override {
    index.reset();
    self.reset();
    src.reset();
    result.reset();
  }
  SavedTensor index, self, src, result;
  int64_t dim = 0;
  ReduceKind reduction = ReduceKind::kSum;
  bool include_self = true;
};

}  // namespace

Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  SG_AUTOCAST(kPromote, scatter_reduce, self, dim, index, src, reduce, include_self);
  const int64_t d = check_indexed(kOp, self, dim, index, &src);
  check_floating(self, kOp);
  const ReduceKind r = parse_reduce(reduce);
  if (src.sizes() != index.sizes()) {
    return scatter_reduce(self, dim, index, covered(src, index.sizes()), reduce, include_self);
  }
  Tensor out = new_output(self.sizes(), self.dtype(), self.device());
  const Stream s = stream_of(out);
  kernels::copy(s, out.view(), self.view());
  kernels::scatter_reduce(s, out.view(), d, index.view(), src.view(), combine_of(r),
                          include_self, kOp);
  if (r == ReduceKind::kMean) {
    NoGradGuard no_grad;
    out = div(out, counts(out, d, index, include_self));
  }
  if (any_requires_grad({self, src})) {
    auto node = std::make_shared<ScatterReduceBackward>();
    node->index = SavedTensor(index);
    node->dim = d;
    node->reduction = r;
    node->include_self = include_self;
    const bool extreme = r == ReduceKind::kAmax || r == ReduceKind::kAmin;
    if (extreme || r == ReduceKind::kProd) {
      node->self = SavedTensor(self);
      node->src = SavedTensor(src);
    }
    wire(node, {self, src}, {out});
    if (extreme || r == ReduceKind::kProd) {
      node->result = SavedTensor(out);
      node->result.mark_output_of(node, 0);
    }
  }
  return out;
}

}  // namespace streamgrad

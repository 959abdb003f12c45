// The catalogue's entries for linear layers, activations, dropout and losses
// (gradcheck/catalogue.h).
#include "gradcheck/catalogue_internal.h"

namespace streamgrad {
namespace catalogue_internal {

void losses_activations(Catalogue& c) {
  c.add("linear", "[3,2] x weight [4,2]^T + bias [4]",
        Fn([](const TensorList& x) { return TensorList{linear(x[0], x[1], x[2])}; }),
        {dense({3, 2}), dense({4, 2}), dense({4})});
  c.add("linear_3d_nobias", "[2,1,3] x weight [2,3]^T", binary([](T x, T w) { return linear(x, w); }),
        {dense({2, 1, 3}), dense({2, 3})});
  c.add("softmax", "[2,5] along dim 1", unary([](T x) { return softmax(x, 1); }), {dense({2, 5})});
  c.add("log_softmax", "[3,4] along dim 0", unary([](T x) { return log_softmax(x, 0); }),
        {dense({3, 4})});
  c.add("dropout", "p 0.4, training, seeded mask (manual_seed(7) before each call)",
        unary([](T x) {
          manual_seed(7);
          return dropout(x, 0.4, true);
        }),
        {dense({3, 4})});
  c.add("flatten", "[2,3,2] dims 1..2", unary([](T x) { return flatten(x, 1); }),
        {dense({2, 3, 2})});
  // argmax has no gradient: the entry checks the values it picks (the row maxima).
  c.add("argmax", "[3,4]: gather(x, 1, argmax(x, 1, keepdim)), the row maxima",
        unary([](T x) { return gather(x, 1, argmax(x, 1, true)); }), {dense({3, 4}, kDistinct)});
  c.add("embedding", "weight [4,3] rows picked by indices [2,2]",
        binary([](T w, T i) { return embedding(w, reshape(i, {2, 2})); }),
        {dense({4, 3}), indices({3, 0, 3, 1})});
  // The padding row's missing gradient is not a derivative: embedding tests check it.
  c.add("embedding_padding", "padding_idx 3 set, indices avoid it",
        binary([](T w, T i) { return embedding(w, i, 3); }), {dense({4, 3}), indices({1, 0, 2})});
  c.add("nll_loss", "log_probs [3,4], mean", binary([](T x, T t) { return nll_loss(x, t); }),
        {dense({3, 4}), indices({1, 0, 3})});
  c.add("nll_loss_ignore_sum", "ignore_index 2, sum",
        binary([](T x, T t) {
          NllLossOptions o;
          o.ignore_index = 2;
          o.reduction = Reduction::kSum;
          return nll_loss(x, t, o);
        }),
        {dense({3, 4}), indices({2, 0, 3})});
  c.add("nll_loss_unbatched", "log_probs [4], 0-dim target, mean",
        binary([](T x, T t) { return nll_loss(x, reshape(t, {})); }), {dense({4}), indices({2})});
  c.add("cross_entropy", "logits [3,4], mean", binary([](T x, T t) { return cross_entropy(x, t); }),
        {dense({3, 4}), indices({1, 0, 3})});
  c.add("cross_entropy_smooth", "label_smoothing 0.2, ignore_index 0, none",
        binary([](T x, T t) {
          CrossEntropyOptions o;
          o.label_smoothing = 0.2;
          o.ignore_index = 0;
          o.reduction = Reduction::kNone;
          return cross_entropy(x, t, o);
        }),
        {dense({3, 4}), indices({1, 0, 3})});
  c.add("cross_entropy_unbatched", "logits [4], 0-dim target, label_smoothing 0.1, none",
        binary([](T x, T t) {
          CrossEntropyOptions o;
          o.label_smoothing = 0.1;
          o.reduction = Reduction::kNone;
          return cross_entropy(x, reshape(t, {}), o);
        }),
        {dense({4}), indices({1})});
  c.add("mse_loss_broadcast", "[2,1] vs [3]: broadcast to [2,3] (with a warning), mean",
        binary([](T a, T b) { return mse_loss(a, b); }), {dense({2, 1}), dense({3})});
  c.add("mse_loss", "[2,3] vs [2,3], mean", binary([](T a, T b) { return mse_loss(a, b); }),
        {dense({2, 3}), dense({2, 3})});
}

}  // namespace catalogue_internal
}  // namespace streamgrad

// The catalogue's entries for the statistics (var, std, logsumexp), maximum / minimum,
// all / any, split / chunk / repeat, cumsum and tril / triu (gradcheck/catalogue.h). all
// and any have no gradient: their entries check them through the where they feed, so a
// wrong answer shows up as a wrong value or gradient. split and chunk return several
// views: their entries weight each piece differently and concatenate them, so a piece in
// the wrong place shows up too. maximum / minimum draw their operands separately, so ties
// (where the gradient is split) have probability zero.
#include <limits>

#include "gradcheck/catalogue_internal.h"

namespace streamgrad {
namespace catalogue_internal {

void statistics_and_masks(Catalogue& c) {
  const Maker cube = {dense({2, 3, 2})};
  const Maker grid = {dense({3, 4})};
  c.add("var", "all of [3,4], correction 1", unary([](T a) { return var(a); }), grid);
  c.add("var_dims", "dims {0, 2} of [2,3,2], correction 0, keepdim",
        unary([](T a) { return var(a, {0, 2}, 0, true); }), cube);
  c.add("var_noncontig", "dim 0 of a transposed [3,4] leaf",
        unary([](T a) { return var(a, {0}); }), {transposed({3, 4})});
  c.add("std", "all of [3,4], correction 1", unary([](T a) { return streamgrad::std(a); }), grid);
  c.add("std_dims", "dim -1 of [2,3,2], correction 0.5",
        unary([](T a) { return streamgrad::std(a, {-1}, 0.5); }), cube);
  c.add("logsumexp", "dims {0, 2} of [2,3,2]",
        unary([](T a) { return logsumexp(a, {0, 2}); }), cube);
  c.add("logsumexp_keepdim", "dim 1 of a every-other-column [3,4] leaf, keepdim",
        unary([](T a) { return logsumexp(a, {1}, true); }), {strided({3, 4})});
  c.add("norm", "p 2 of all of [3,4]", unary([](T a) { return norm(a); }), grid);
  c.add("norm_dims", "p 3 over dims {0, 2} of [2,3,2], keepdim",
        unary([](T a) { return norm(a, 3, {0, 2}, true); }), cube);
  c.add("norm_p1", "p 1 over dim 1 of a transposed [3,4] leaf",
        unary([](T a) { return norm(a, 1, {1}); }), {transposed({3, 4})});
  c.add("norm_inf", "p inf over dim -1 of [2,3,2]",
        unary([](T a) { return norm(a, std::numeric_limits<double>::infinity(), {-1}); }),
        cube);
  c.add("baddbmm", "0.5 [2,1,2] + 2 ([2,2,3] x [2,3,2])",
        [](const TensorList& x) { return TensorList{baddbmm(x[0], x[1], x[2], 0.5, 2.0)}; },
        {dense({2, 1, 2}), dense({2, 2, 3}), dense({2, 3, 2})});
  c.add("maximum", "[2,3] against [3], broadcast", binary([](T a, T b) { return maximum(a, b); }),
        {dense({2, 3}), dense({3})});
  c.add("minimum", "[2,3] against a transposed [2,3] leaf",
        binary([](T a, T b) { return minimum(a, b); }), {dense({2, 3}), transposed({2, 3})});
  const In m_rows = mask({2, 3}, {1, 1, 1, 1, 0, 1});
  c.add("all", "where(all(mask with a zero), a, -a): false",
        binary([](T m, T a) { return where(all(m), a, neg(a)); }), {m_rows, dense({2, 3})});
  c.add("all_dim", "where(all(mask, 1, keepdim), a, 2a): rows true and false",
        binary([](T m, T a) { return where(all(m, 1, true), a, mul(a, 2.0)); }),
        {m_rows, dense({2, 3})});
  const In m_one = mask({2, 3}, {0, 0, 0, 0, 1, 0});
  c.add("any", "where(any(mask with one set), a, -a): true",
        binary([](T m, T a) { return where(any(m), a, neg(a)); }), {m_one, dense({2, 3})});
  c.add("any_dim", "where(any(mask, -1), a [3,2]^T, exp(a)): rows false and true",
        binary([](T m, T a) {
          const Tensor t = transpose(a, 0, 1);
          return where(any(m, -1, true), t, exp(t));
        }),
        {m_one, dense({3, 2})});
  c.add("split", "split [3,4] by 3 along dim 1 (pieces 3, 1), weighted and concatenated",
        unary([](T a) {
          const std::vector<Tensor> p = split(a, 3, 1);
          return cat({mul(p[0], 2.0), exp(p[1])}, 1);
        }),
        grid);
  c.add("split_sizes", "split a transposed [3,4] leaf into {1, 2} along dim 0",
        unary([](T a) {
          const std::vector<Tensor> p = split(a, std::vector<int64_t>{1, 2}, 0);
          return cat({mul(p[1], p[1]), neg(p[0])}, 0);
        }),
        {transposed({3, 4})});
  c.add("chunk", "chunk [2,5] into 3 along dim -1 (pieces 2, 2, 1)",
        unary([](T a) {
          const std::vector<Tensor> p = chunk(a, 3, -1);
          return cat({p[2], mul(p[0], 3.0), mul(p[1], p[1])}, 1);
        }),
        {dense({2, 5})});
  c.add("repeat", "[2,3] repeated {2, 1, 2}", unary([](T a) { return repeat(a, {2, 1, 2}); }),
        {dense({2, 3})});
  c.add("cumsum", "dim 1 of [2,5]", unary([](T a) { return cumsum(a, 1); }),
        {dense({2, 5})});
  c.add("cumsum_noncontig", "dim 0 of a transposed [3,4] leaf",
        unary([](T a) { return cumsum(a, 0); }), {transposed({3, 4})});
  c.add("cumsum_middle", "dim 1 of [2,3,2] (lines strided on both sides)",
        unary([](T a) { return cumsum(a, 1); }), {dense({2, 3, 2})});
  c.add("tril", "[3,4], diagonal 0", unary([](T a) { return tril(a); }), grid);
  c.add("tril_batched", "[2,2,3], diagonal -1", unary([](T a) { return tril(a, -1); }),
        {dense({2, 2, 3})});
  c.add("triu", "transposed [3,4] leaf, diagonal 1", unary([](T a) { return triu(a, 1); }),
        {transposed({3, 4})});
}

}  // namespace catalogue_internal
}  // namespace streamgrad

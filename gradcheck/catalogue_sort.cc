// The catalogue's entries for topk / sort / argsort, multinomial, adaptive_avg_pool2d and
// pad (gradcheck/catalogue.h). Sorting entries draw pairwise distinct values, so that a
// perturbation never reorders them. argsort and multinomial have no gradient: their
// entries check the indices through the gather they feed. multinomial draws from fixed
// weights (not from the checked input, whose perturbation could change a draw) after
// manual_seed(11), so every call draws the same indices.
#include "gradcheck/catalogue_internal.h"

namespace streamgrad {
namespace catalogue_internal {
namespace {

Tensor fixed_weights(const Tensor& like) {
  return from_vector<double>({0.1, 0.0, 2.0, 1.0, 3.0, 1.0, 0.5, 0.0}, {2, 4},
                             TensorOptions().dtype(DType::kFloat64).device(like.device()));
}

void sorting(Catalogue& c) {
  const Maker grid = {dense({3, 4}, kDistinct)};
  c.add("topk", "[3,4], k 2 along dim 1, largest",
        unary([](T x) { return std::get<0>(topk(x, 2, 1)); }), grid);
  c.add("topk_smallest", "[3,4] transposed, k 2 along dim 0, smallest",
        unary([](T x) { return std::get<0>(topk(x, 2, 0, /*largest=*/false)); }),
        {transposed({3, 4}, kDistinct)});
  c.add("sort", "[3,4] along the last dim, ascending",
        unary([](T x) { return std::get<0>(sort(x)); }), grid);
  c.add("sort_stable", "[3,4] every-other-column, stable, along dim 0, descending",
        unary([](T x) { return std::get<0>(sort(x, std::optional<bool>(true), 0, true)); }),
        {strided({3, 4}, kDistinct)});
  c.add("argsort", "[3,4]: gather(x, 1, argsort(x, 1)), the sorted rows",
        unary([](T x) { return gather(x, 1, argsort(x, 1)); }), grid);
  c.add("argsort_stable", "[3,4]: gather(x, 0, argsort(x, stable, 0, descending))",
        unary([](T x) { return gather(x, 0, argsort(x, std::optional<bool>(true), 0, true)); }),
        grid);
}

void sampling(Catalogue& c) {
  c.add("multinomial", "gather(x [2,4], 1, 3 draws without replacement from fixed weights)",
        unary([](T x) {
          manual_seed(11);
          return gather(x, 1, multinomial(fixed_weights(x), 3));
        }),
        {dense({2, 4})});
  c.add("multinomial_replacement", "gather(x [2,4], 1, 5 draws with replacement)",
        unary([](T x) {
          manual_seed(11);
          return gather(x, 1, multinomial(fixed_weights(x), 5, true));
        }),
        {dense({2, 4})});
}

void pooling_padding(Catalogue& c) {
  c.add("adaptive_avg_pool2d", "[1,1,3,4] to {2,3}: overlapping windows",
        unary([](T x) { return adaptive_avg_pool2d(x, {2, 3}); }), {dense({1, 1, 3, 4})});
  c.add("adaptive_avg_pool2d_unbatched", "[1,3,4] to {2,2}",
        unary([](T x) { return adaptive_avg_pool2d(x, {2, 2}); }), {dense({1, 3, 4})});
  c.add("pad", "[2,3] constant {1,2,-1,1} value 0.5: pads the last dim, crops and pads dim 0",
        unary([](T x) { return pad(x, {1, 2, -1, 1}, "constant", 0.5); }), {dense({2, 3})});
  c.add("pad_reflect", "[1,2,3] reflect {2,1,1,0}",
        unary([](T x) { return pad(x, {2, 1, 1, 0}, "reflect"); }), {dense({1, 2, 3})});
  c.add("pad_replicate", "[1,2,3] replicate {1,2,-1,1}: pads the last dim, crops and pads dim 1",
        unary([](T x) { return pad(x, {1, 2, -1, 1}, "replicate"); }), {dense({1, 2, 3})});
  c.add("pad_circular",
        "[1,2,3] circular {2,-1,1,2}: wraps 2 of the last dim after cropping one, and dim 1 "
        "(size 2) by 1 and 2",
        unary([](T x) { return pad(x, {2, -1, 1, 2}, "circular"); }), {dense({1, 2, 3})});
}

}  // namespace

void sort_sample_pad(Catalogue& c) {
  sorting(c);
  sampling(c);
  pooling_padding(c);
}

}  // namespace catalogue_internal
}  // namespace streamgrad

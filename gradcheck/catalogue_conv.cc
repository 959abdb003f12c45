// The catalogue's entries for gathering, index_put, convolution, pooling and normalisation
// (gradcheck/catalogue.h). Inputs stay at most 12 elements (float64) so Jacobians stay small.
#include <string>
#include <vector>

#include "gradcheck/catalogue_internal.h"

namespace streamgrad {
namespace catalogue_internal {

namespace {

Tensor index2d(const Tensor& flat, Shape shape) { return reshape(flat, std::move(shape)); }

// scatter_reduce: every reduce with and without self, duplicates in the index (position
// [0,0] gets two values, [0,1] one, [1,2] three; the other five keep self's value).
// amax / amin draw pairwise distinct values within each input (ties between self and src
// have probability zero); prod keeps its values away from 0 (the zero cases are tested by
// hand in tests/ops/scatter_reduce_test.cc).
void scatter_reductions(Catalogue& c) {
  const std::vector<int64_t> dup = {0, 0, 1, 2, 2, 2};
  struct Variant {
    const char* name;
    const char* reduce;
    bool include_self;
    Domain dom;
  };
  const Variant variants[] = {
      {"scatter_reduce", "sum", true, kAny},
      {"scatter_reduce_sum_exclude", "sum", false, kAny},
      {"scatter_reduce_prod", "prod", true, kNonzero},
      {"scatter_reduce_prod_exclude", "prod", false, kNonzero},
      {"scatter_reduce_mean", "mean", true, kAny},
      {"scatter_reduce_mean_exclude", "mean", false, kAny},
      {"scatter_reduce_amax", "amax", true, kDistinct},
      {"scatter_reduce_amax_exclude", "amax", false, kDistinct},
      {"scatter_reduce_amin", "amin", true, kDistinct},
      {"scatter_reduce_amin_exclude", "amin", false, kDistinct},
  };
  for (const Variant& v : variants) {
    const std::string reduce = v.reduce;
    const bool self = v.include_self;
    c.add(v.name,
          std::string("self [2,4], src [2,3] along dim 1, reduce ") + v.reduce +
              (self ? "" : ", include_self false"),
          Fn([reduce, self](const TensorList& x) {
            return TensorList{scatter_reduce(x[0], 1, index2d(x[2], {2, 3}), x[1], reduce, self)};
          }),
          {dense({2, 4}, v.dom), dense({2, 3}, v.dom), indices(dup)});
  }
  c.add("scatter_reduce_src_larger", "amax along dim 0: self [3,2], the [2,2] corner of src [3,3]",
        Fn([](const TensorList& x) {
          return TensorList{scatter_reduce(x[0], 0, index2d(x[2], {2, 2}), x[1], "amax")};
        }),
        {dense({3, 2}, kDistinct), dense({3, 3}, kDistinct), indices({2, 0, 2, 1})});
}

}  // namespace

void conv_pool_norm(Catalogue& c) {
  c.add("gather", "[3,4] gather dim 1 with a [3,2] index (repeats)",
        binary([](T a, T i) { return gather(a, 1, index2d(i, {3, 2})); }),
        {dense({3, 4}), indices({0, 3, 1, 1, 2, 0})});
  c.add("gather_dim0", "[3,4] gather dim 0 with a [2,4] index",
        binary([](T a, T i) { return gather(a, 0, index2d(i, {2, 4})); }),
        {dense({3, 4}), indices({2, 0, 1, 1, 0, 0, 2, 2})});
  c.add("scatter_add", "self [2,4] + src [2,3] scattered along dim 1 (duplicates add)",
        Fn([](const TensorList& x) {
          return TensorList{scatter_add(x[0], 1, index2d(x[2], {2, 3}), x[1])};
        }),
        {dense({2, 4}), dense({2, 3}), indices({0, 0, 3, 1, 2, 1})});
  c.add("scatter_add_src_larger", "self [2,4] + the [2,2] corner of src [3,3] along dim 1",
        Fn([](const TensorList& x) {
          return TensorList{scatter_add(x[0], 1, index2d(x[2], {2, 2}), x[1])};
        }),
        {dense({2, 4}), dense({3, 3}), indices({3, 0, 1, 3})});
  c.add("scatter", "self [2,4], src [2,3] written along dim 1 (distinct indices)",
        Fn([](const TensorList& x) {
          return TensorList{scatter(x[0], 1, index2d(x[2], {2, 3}), x[1])};
        }),
        {dense({2, 4}), dense({2, 3}), indices({0, 3, 1, 2, 1, 0})});
  c.add("scatter_value", "[3,4] with 0.5 written at a [2,4] index along dim 0",
        binary([](T a, T i) { return scatter(a, 0, index2d(i, {2, 4}), 0.5); }),
        {dense({3, 4}), indices({2, 0, 1, 1, 0, 2, 2, 0})});
  scatter_reductions(c);
  // index_put: indices [2,1] and [2] broadcast to [2,2] (distinct positions: an assigned
  // duplicate reaches the result once but values' gradient twice, as in the reference).
  const Fn put_pairs = [](const TensorList& x) {
    return TensorList{index_put(x[0], {index2d(x[2], {2, 1}), x[3]}, x[1])};
  };
  c.add("index_put", "self [3,4], values [2,2] at rows {2,-3} x columns {1,3}", put_pairs,
        {dense({3, 4}), dense({2, 2}), indices({2, -3}), indices({1, 3})});
  c.add("index_put_accumulate", "self [3,4] + a [4] row at rows {2,0,2} (duplicates add)",
        Fn([](const TensorList& x) { return TensorList{index_put(x[0], {x[2]}, x[1], true)}; }),
        {dense({3, 4}), dense({4}), indices({2, 0, 2})});
  c.add("index_put_mask", "self [3,4], a 0-dim value at the rows of bool mask {1,0,1}",
        Fn([](const TensorList& x) { return TensorList{index_put(x[0], {x[2]}, x[1])}; }),
        {dense({3, 4}), dense({}), mask({3}, {1, 0, 1})});
  c.add("index_put_", "clone(self [3,4]).index_put_(rows {0,2} x columns {3,-4}, values [2])",
        Fn([](const TensorList& x) {
          Tensor t = clone(x[0]);
          return TensorList{index_put_(t, {x[2], x[3]}, x[1])};
        }),
        {dense({3, 4}), dense({2}), indices({0, 2}), indices({3, -4})});
  c.add("index_put__accumulate_transposed",
        "transpose(clone(self [3,4])).index_put_(rows {1,1,3}, [3] row, accumulate): leading "
        "dims that do not merge",
        Fn([](const TensorList& x) {
          Tensor t = transpose(clone(x[0]), 0, 1);
          return TensorList{index_put_(t, {x[2]}, x[1], true)};
        }),
        {dense({3, 4}), dense({3}), indices({1, 1, 3})});
  const Maker conv_in = {dense({1, 2, 2, 3}), dense({2, 2, 1, 2}), dense({2})};
  c.add("conv2d", "[1,2,2,3] * [2,2,1,2] + bias",
        Fn([](const TensorList& x) { return TensorList{conv2d(x[0], x[1], x[2])}; }), conv_in);
  c.add("conv2d_padded", "stride 2, padding 1, dilation (1,2), no bias, unbatched [1,3,4]",
        binary([](T x, T w) {
          Conv2dParams p;
          p.stride = {2, 2};
          p.padding = {1, 1};
          p.dilation = {1, 2};
          return conv2d(x, w, Tensor(), p);
        }),
        {dense({1, 3, 4}), dense({2, 1, 2, 2})});
  c.add("conv2d_groups", "[1,2,2,2] with 2 groups, weight [4,1,1,2]",
        binary([](T x, T w) {
          Conv2dParams p;
          p.groups = 2;
          return conv2d(x, w, Tensor(), p);
        }),
        {dense({1, 2, 2, 2}), dense({4, 1, 1, 2})});
  c.add("conv2d_input_grad", "weight [2,2,1,2] and grad_output [1,2,2,2] onto input [1,2,2,3]",
        binary([](T w, T g) { return conv2d_input_grad({1, 2, 2, 3}, w, g); }),
        {dense({2, 2, 1, 2}), dense({1, 2, 2, 2})});
  c.add("conv2d_input_grad_groups",
        "2 groups, stride 2, padding 1: weight [2,1,1,2], grad [1,2,2,2]",
        binary([](T w, T g) {
          Conv2dParams p;
          p.groups = 2;
          p.stride = {2, 2};
          p.padding = {1, 1};
          return conv2d_input_grad({1, 2, 2, 3}, w, g, p);
        }),
        {dense({2, 1, 1, 2}), dense({1, 2, 2, 2})});
  c.add("conv2d_weight_grad", "input [1,2,2,3] and grad_output [1,2,2,2] onto weight [2,2,1,2]",
        binary([](T x, T g) { return conv2d_weight_grad(x, {2, 2, 1, 2}, g); }),
        {dense({1, 2, 2, 3}), dense({1, 2, 2, 2})});
  c.add("conv2d_weight_grad_groups",
        "2 groups, dilation (1,2): input [1,2,2,3], grad [1,4,2,1]",
        binary([](T x, T g) {
          Conv2dParams p;
          p.groups = 2;
          p.dilation = {1, 2};
          return conv2d_weight_grad(x, {4, 1, 1, 2}, g, p);
        }),
        {dense({1, 2, 2, 3}), dense({1, 4, 2, 1})});
  c.add("conv_transpose2d", "[1,2,2,2] with weight [2,1,2,2] + bias, stride 2, padding 1, "
        "output_padding 1",
        Fn([](const TensorList& x) {
          ConvTranspose2dParams p;
          p.stride = {2, 2};
          p.padding = {1, 1};
          p.output_padding = {1, 1};
          return TensorList{conv_transpose2d(x[0], x[1], x[2], p)};
        }),
        {dense({1, 2, 2, 2}), dense({2, 1, 2, 2}), dense({1})});
  c.add("conv_transpose2d_groups", "unbatched [2,2,1], 2 groups, weight [2,1,1,2], dilation 2",
        binary([](T x, T w) {
          ConvTranspose2dParams p;
          p.groups = 2;
          p.dilation = {2, 2};
          return conv_transpose2d(x, w, Tensor(), p);
        }),
        {dense({2, 2, 1}), dense({2, 1, 1, 2})});
  c.add("interpolate_nearest", "[1,2,2,3] to 3x2 (rows repeated, columns dropped)",
        unary([](T x) {
          InterpolateOptions o;
          o.size = {3, 2};
          return interpolate(x, o);
        }),
        {dense({1, 2, 2, 3})});
  c.add("interpolate_bilinear", "[1,1,2,3] by factor 1.5, align_corners false",
        unary([](T x) {
          InterpolateOptions o;
          o.scale_factor = {1.5};
          o.mode = "bilinear";
          return interpolate(x, o);
        }),
        {dense({1, 1, 2, 3})});
  c.add("unfold", "[1,1,3,4] 2x2 windows, padding 1, stride 2",
        unary([](T x) {
          Conv2dParams p;
          p.padding = {1, 1};
          p.stride = {2, 2};
          return unfold(x, {2, 2}, p);
        }),
        {dense({1, 1, 3, 4})});
  c.add("fold", "[1,4,2] columns summed onto a [2,3] image with 2x2 windows (overlaps)",
        unary([](T x) { return fold(x, {2, 3}, {2, 2}); }), {dense({1, 4, 2})});
  Pool2dParams max22;
  max22.kernel_size = {2, 2};
  c.add("max_pool2d", "[1,1,3,4] 2x2, stride 2, ceil_mode",
        unary([max22](T x) {
          Pool2dParams p = max22;
          p.ceil_mode = true;
          return max_pool2d(x, p);
        }),
        {dense({1, 1, 3, 4}, kDistinct)});
  c.add("max_pool2d_ceil_only", "[1,1,3,3] 4x4 stride 2: only ceil_mode gives an output",
        unary([](T x) {
          Pool2dParams p;
          p.kernel_size = {4, 4};
          p.stride = {2, 2};
          p.ceil_mode = true;
          return max_pool2d(x, p);
        }),
        {dense({1, 1, 3, 3}, kDistinct)});
  c.add("max_pool2d_with_indices", "[1,3,4] 2x2 stride 1 padding 1 (values)",
        unary([max22](T x) {
          Pool2dParams p = max22;
          p.stride = {1, 1};
          p.padding = {1, 1};
          return max_pool2d_with_indices(x, p).first;
        }),
        {dense({1, 3, 4}, kDistinct)});
  c.add("avg_pool2d", "[1,1,3,4] 2x2 stride 1, padding 1 counted",
        unary([max22](T x) {
          Pool2dParams p = max22;
          p.stride = {1, 1};
          p.padding = {1, 1};
          return avg_pool2d(x, p);
        }),
        {dense({1, 1, 3, 4})});
  c.add("avg_pool2d_exclude_pad", "[1,3,4] 2x2 stride 2 padding 1, count_include_pad false",
        unary([max22](T x) {
          Pool2dParams p = max22;
          p.padding = {1, 1};
          p.count_include_pad = false;
          return avg_pool2d(x, p);
        }),
        {dense({1, 3, 4})});
  Pool2dParams ceil33;
  ceil33.kernel_size = {3, 3};
  ceil33.stride = {2, 2};
  ceil33.padding = {1, 1};
  ceil33.ceil_mode = true;
  c.add("avg_pool2d_ceil", "[1,1,4,3] 3x3 stride 2 padding 1, ceil_mode: a last row past the "
        "padding", unary([ceil33](T x) { return avg_pool2d(x, ceil33); }), {dense({1, 1, 4, 3})});
  c.add("avg_pool2d_ceil_exclude_pad", "as avg_pool2d_ceil, count_include_pad false",
        unary([ceil33](T x) {
          Pool2dParams p = ceil33;
          p.count_include_pad = false;
          return avg_pool2d(x, p);
        }),
        {dense({1, 1, 4, 3})});
  c.add("batch_norm", "training [3,2,2] with affine and fresh running statistics",
        Fn([](const TensorList& x) {
          const TensorOptions o = TensorOptions().dtype(x[0].dtype()).device(x[0].device());
          Tensor rm = zeros({2}, o), rv = ones({2}, o);
          return TensorList{batch_norm(x[0], x[1], x[2], rm, rv, /*training=*/true)};
        }),
        {dense({3, 2, 2}), dense({2}), dense({2})});
  c.add("batch_norm_4d", "training [2,2,1,2] with affine, no running statistics",
        Fn([](const TensorList& x) {
          return TensorList{batch_norm(x[0], x[1], x[2], Tensor(), Tensor(), /*training=*/true)};
        }),
        {dense({2, 2, 1, 2}), dense({2}), dense({2})});
  c.add("batch_norm_plain", "training [4,3] without affine",
        unary([](T x) { return batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true); }),
        {dense({4, 3})});
  c.add("batch_norm_eval", "eval [2,2,3] with running statistics, no affine",
        unary([](T x) {
          const TensorOptions o = TensorOptions().dtype(x.dtype()).device(x.device());
          const Tensor rm = from_vector<double>({0.5, -0.25}, {2}, o);
          const Tensor rv = from_vector<double>({2.0, 0.5}, {2}, o);
          return batch_norm(x, Tensor(), Tensor(), rm, rv, /*training=*/false);
        }),
        {dense({2, 2, 3})});
  c.add("group_norm", "[1,4,3] in 2 groups, weight and bias [4]",
        Fn([](const TensorList& x) { return TensorList{group_norm(x[0], 2, x[1], x[2])}; }),
        {dense({1, 4, 3}), dense({4}), dense({4})});
  c.add("group_norm_4d", "[1,3,2,2] in 3 groups (one channel each), weight [3], eps 1e-3",
        binary([](T x, T w) { return group_norm(x, 3, w, Tensor(), 1e-3); }),
        {dense({1, 3, 2, 2}), dense({3})});
  c.add("group_norm_plain", "[3,4] in 1 group, no affine",
        unary([](T x) { return group_norm(x, 1); }), {dense({3, 4})});
  c.add("group_norm_noncontig", "transposed [2,6] leaf in 2 groups, bias [6] only",
        binary([](T x, T b) { return group_norm(x, 2, Tensor(), b); }),
        {transposed({2, 6}), dense({6})});
  c.add("layer_norm", "[3,4] over the last dim, weight and bias [4]",
        Fn([](const TensorList& x) { return TensorList{layer_norm(x[0], {4}, x[1], x[2])}; }),
        {dense({3, 4}), dense({4}), dense({4})});
  c.add("layer_norm_2d", "[2,2,3] over the last two dims, weight and bias [2,3], eps 1e-3",
        Fn([](const TensorList& x) {
          return TensorList{layer_norm(x[0], {2, 3}, x[1], x[2], 1e-3)};
        }),
        {dense({2, 2, 3}), dense({2, 3}), dense({2, 3})});
  c.add("layer_norm_plain", "[2,5] without weight or bias",
        unary([](T x) { return layer_norm(x, {5}); }), {dense({2, 5})});
  c.add("layer_norm_noncontig", "transposed [3,4] leaf over the last dim, weight [4] only",
        binary([](T x, T w) { return layer_norm(x, {4}, w); }), {transposed({3, 4}), dense({4})});
  c.add("rms_norm", "[3,4] over the last dim, weight [4], eps the default (float64's epsilon)",
        binary([](T x, T w) { return rms_norm(x, {4}, w); }), {dense({3, 4}), dense({4})});
  c.add("rms_norm_2d", "[2,2,3] over the last two dims, no weight, eps 1e-3",
        unary([](T x) { return rms_norm(x, {2, 3}, Tensor(), 1e-3); }), {dense({2, 2, 3})});
}

}  // namespace catalogue_internal
}  // namespace streamgrad

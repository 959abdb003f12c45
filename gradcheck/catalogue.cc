// The operator catalogue (gradcheck/catalogue.h): entries in ops.h order.
#include "gradcheck/catalogue.h"

#include "engine/grad_mode.h"
#include "gradcheck/catalogue_internal.h"

namespace streamgrad {
namespace catalogue_internal {

void arithmetic(Catalogue& c) {
  const Maker pair = {dense({2, 3}), dense({2, 3})};
  const Maker noncontig = {transposed({2, 3}), strided({2, 3})};
  const Maker one = {dense({2, 3})};
  const Fn add2 = binary([](T a, T b) { return add(a, b); });
  const Fn mul2 = binary([](T a, T b) { return mul(a, b); });
  const Fn div2 = binary([](T a, T b) { return div(a, b); });
  c.add("add", "[2,3] + [2,3]", add2, pair);
  c.add("add_alpha", "a + (-2.5) b", binary([](T a, T b) { return add(a, b, -2.5); }), pair);
  c.add("add_broadcast", "[3,1] + [4] -> [3,4]", add2, {dense({3, 1}), dense({4})});
  c.add("add_noncontig", "transposed + every-other-column leaves", add2, noncontig);
  c.add("add_scalar", "a + 1.5", unary([](T a) { return add(a, 1.5); }), one);
  c.add("sub", "[2,3] - [2,3]", binary([](T a, T b) { return sub(a, b); }), pair);
  c.add("sub_alpha_broadcast", "[2,3] - 0.25 * [3]",
        binary([](T a, T b) { return sub(a, b, 0.25); }), {dense({2, 3}), dense({3})});
  c.add("sub_scalar", "a - 2", unary([](T a) { return sub(a, 2.0); }), one);
  c.add("sub_rscalar", "sub(double, Tensor): 2 - a", unary([](T a) { return sub(2.0, a); }), one);
  c.add("mul", "[2,3] * [2,3]", mul2, pair);
  c.add("mul_broadcast", "[2,1,3] * [2,3] -> [2,2,3]", mul2, {dense({2, 1, 3}), dense({2, 3})});
  c.add("mul_noncontig", "transposed * every-other-column leaves", mul2, noncontig);
  c.add("mul_self", "a * a: one leaf on both operands, gradients accumulate",
        unary([](T a) { return mul(a, a); }), one);
  c.add("mul_scalar", "a * -1.5", unary([](T a) { return mul(a, -1.5); }), one);
  c.add("div", "[2,3] / [2,3], |divisor| >= 0.5", div2, {dense({2, 3}), dense({2, 3}, kNonzero)});
  c.add("div_broadcast", "[2,3] / [2,1], |divisor| >= 0.5", div2,
        {dense({2, 3}), dense({2, 1}, kNonzero)});
  c.add("div_scalar", "a / 4", unary([](T a) { return div(a, 4.0); }), one);
  c.add("div_rscalar", "div(double, Tensor): 2 / a, |a| >= 0.5",
        unary([](T a) { return div(2.0, a); }), {dense({2, 3}, kNonzero)});
  // A 0-dim input moved to cpu acts as a scalar beside the other input's device (on cpu
  // itself to() is a no-op and these are plain broadcasts).
  const Maker with_scalar = {dense({2, 3}), dense({})};
  c.add("mul_cpu_scalar", "[2,3] * to(0-dim b, cpu)",
        binary([](T a, T b) { return mul(a, to(b, Device("cpu"))); }), with_scalar);
  c.add("sub_cpu_scalar", "to(0-dim b, cpu) - 0.5 [2,3]",
        binary([](T a, T b) { return sub(to(b, Device("cpu")), a, 0.5); }), with_scalar);
  c.add("div_cpu_scalar", "to(0-dim b, cpu) / [2,3], |a| >= 0.5",
        binary([](T a, T b) { return div(to(b, Device("cpu")), a); }),
        {dense({2, 3}, kNonzero), dense({})});
  c.add("neg", "-a", unary([](T a) { return neg(a); }), one);
  c.add("neg_noncontig", "-a, every-other-column leaf", unary([](T a) { return neg(a); }),
        {strided({3, 2})});
}

void math(Catalogue& c) {
  const Maker any = {dense({2, 3})};
  const Maker pos = {dense({2, 3}, kPositive)};
  const Maker kinkfree = {dense({2, 3}, kKinkFree)};
  c.add("exp", "[2,3]", unary([](T a) { return exp(a); }), any);
  c.add("exp_noncontig", "transposed leaf", unary([](T a) { return exp(a); }),
        {transposed({3, 2})});
  c.add("log", "a in [0.5, 2)", unary([](T a) { return log(a); }), pos);
  c.add("log_noncontig", "every-other-column leaf in [0.5, 2)",
        unary([](T a) { return log(a); }), {strided({2, 3}, kPositive)});
  c.add("sqrt", "a in [0.5, 2)", unary([](T a) { return sqrt(a); }), pos);
  c.add("pow", "a^2.5, a in [0.5, 2)", unary([](T a) { return pow(a, 2.5); }), pos);
  c.add("pow_int", "a^3, any sign", unary([](T a) { return pow(a, 3.0); }), any);
  c.add("pow_negative", "a^-1.5, a in [0.5, 2)", unary([](T a) { return pow(a, -1.5); }), pos);
  c.add("tanh", "[2,3] in [-1, 1)", unary([](T a) { return tanh(a); }), any);
  c.add("sigmoid", "[2,3] in [-1, 1)", unary([](T a) { return sigmoid(a); }), any);
  c.add("relu", "|a| >= 0.1 (away from the kink)", unary([](T a) { return relu(a); }), kinkfree);
  c.add("relu_noncontig", "transposed leaf, |a| >= 0.1", unary([](T a) { return relu(a); }),
        {transposed({3, 2}, kKinkFree)});
  c.add("abs", "|a| >= 0.1 (away from the kink)", unary([](T a) { return abs(a); }), kinkfree);
  c.add("log1p", "a in [0.5, 2)", unary([](T a) { return log1p(a); }), pos);
  c.add("rsqrt", "a in [0.5, 2)", unary([](T a) { return rsqrt(a); }), pos);
  c.add("erf", "[2,3]", unary([](T a) { return erf(a); }), any);
  c.add("sin", "[2,3]", unary([](T a) { return sin(a); }), any);
  c.add("cos", "[2,3]", unary([](T a) { return cos(a); }), any);
  c.add("silu", "[2,3]", unary([](T a) { return silu(a); }), any);
  c.add("gelu", "exact, through erf", unary([](T a) { return gelu(a); }), any);
  c.add("gelu_tanh", "the tanh approximation", unary([](T a) { return gelu(a, "tanh"); }), any);
  // Bounds away from the inputs' values: the kinks are not differentiable.
  c.add("clamp", "[2,3] into [-0.55, 0.45]",
        unary([](T a) { return clamp(a, -0.55, 0.45); }), any);
  c.add("clamp_min", "max(a, 0.05)", unary([](T a) { return clamp_min(a, 0.05); }), any);
  c.add("clamp_max", "min(a, -0.05)", unary([](T a) { return clamp_max(a, -0.05); }), any);
  c.add("gelu_noncontig", "exact, transposed leaf", unary([](T a) { return gelu(a); }),
        {transposed({3, 2})});
}

void reductions(Catalogue& c) {
  const Maker cube = {dense({2, 3, 2})};
  const Maker tr = {transposed({3, 4})};
  c.add("sum", "all of [2,3,2]", unary([](T a) { return sum(a); }), cube);
  c.add("sum_dims", "dims {0, 2} of [2,3,2]", unary([](T a) { return sum(a, {0, 2}); }), cube);
  c.add("sum_keepdim", "dim -1 of [2,3,2], keepdim",
        unary([](T a) { return sum(a, {-1}, true); }), cube);
  c.add("sum_noncontig", "dim 0 of a transposed [3,4] leaf",
        unary([](T a) { return sum(a, {0}); }), tr);
  c.add("mean", "all of [2,3,2]", unary([](T a) { return mean(a); }), cube);
  c.add("mean_dims", "dim 1 of [2,3,2]", unary([](T a) { return mean(a, {1}); }), cube);
  c.add("mean_keepdim", "dims {0, 2} of [2,3,2], keepdim",
        unary([](T a) { return mean(a, {0, 2}, true); }), cube);
  c.add("mean_noncontig", "dim 1 of a transposed [3,4] leaf",
        unary([](T a) { return mean(a, {1}); }), tr);
  // Values only: the int64 indices are not differentiable. Distinct values: no ties.
  const Maker distinct = {dense({3, 4}, kDistinct)};
  const Maker distinct_tr = {transposed({3, 4}, kDistinct)};
  c.add("max", "values along dim 1 of [3,4], no ties",
        unary([](T a) { return max(a, 1).first; }), distinct);
  c.add("max_keepdim", "values along dim 0 of [3,4], keepdim, no ties",
        unary([](T a) { return max(a, 0, true).first; }), distinct);
  c.add("max_noncontig", "values along dim -1 of a transposed leaf, no ties",
        unary([](T a) { return max(a, -1).first; }), distinct_tr);
  c.add("min", "values along dim 1 of [3,4], no ties",
        unary([](T a) { return min(a, 1).first; }), distinct);
  c.add("min_keepdim", "values along dim 0 of [3,4], keepdim, no ties",
        unary([](T a) { return min(a, 0, true).first; }), distinct);
  c.add("min_noncontig", "values along dim 0 of a transposed leaf, no ties",
        unary([](T a) { return min(a, 0).first; }), distinct_tr);
}

void linear_algebra(Catalogue& c) {
  const Fn mm = binary([](T a, T b) { return matmul(a, b); });
  c.add("matmul", "[3,2] x [2,4]", mm, {dense({3, 2}), dense({2, 4})});
  c.add("matmul_batched", "[2,2,3] x [2,3,2]", mm, {dense({2, 2, 3}), dense({2, 3, 2})});
  c.add("matmul_broadcast", "[2,2,3] x [3,2] (the 2-D operand broadcasts over the batch)", mm,
        {dense({2, 2, 3}), dense({3, 2})});
  c.add("matmul_noncontig", "transposed [3,2] x every-other-column [2,4]", mm,
        {transposed({3, 2}), strided({2, 4})});
  c.add("matmul_dot", "[3] x [3]: a 0-dim dot product", mm, {dense({3}), dense({3})});
  c.add("matmul_vector_matrix", "[3] x [3,2]", mm, {dense({3}), dense({3, 2})});
  c.add("matmul_matrix_vector", "[2,3] x [3]", mm, {dense({2, 3}), dense({3})});
  c.add("matmul_fold", "[1,2,2,3] x [3,2]: the batch folded into one gemm", mm,
        {dense({1, 2, 2, 3}), dense({3, 2})});
  c.add("matmul_batch_vector", "[2,2,3] x [3]", mm, {dense({2, 2, 3}), dense({3})});
  c.add("matmul_vector_batch", "[3] x [2,3,2]", mm, {dense({3}), dense({2, 3, 2})});
  c.add("matmul_4d_broadcast", "[2,1,2,3] x [3,3,1]: batch dims broadcast to [2,3]", mm,
        {dense({2, 1, 2, 3}), dense({3, 3, 1})});
  c.add("bmm", "[2,2,3] x [2,3,2]", binary([](T a, T b) { return bmm(a, b); }),
        {dense({2, 2, 3}), dense({2, 3, 2})});
  const Maker qkv = {dense({1, 2, 3}), dense({1, 3, 3}), dense({1, 3, 2})};
  c.add("scaled_dot_product_attention", "q [1,2,3], k [1,3,3], v [1,3,2]: the fused kernels",
        [](const TensorList& x) {
          return TensorList{scaled_dot_product_attention(x[0], x[1], x[2])};
        },
        qkv);
  c.add("scaled_dot_product_attention_causal", "the same, causal (L < S)",
        [](const TensorList& x) {
          return TensorList{scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true)};
        },
        qkv);
  c.add("scaled_dot_product_attention_scaled", "the same, scale 0.7",
        [](const TensorList& x) {
          return TensorList{
              scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, false, 0.7)};
        },
        qkv);
}

void shapes(Catalogue& c) {
  const Maker cube = {dense({2, 3, 2})};
  const Maker m34 = {dense({3, 4})};
  const Maker tr = {transposed({3, 4})};
  c.add("transpose", "dims 0, 2 of [2,3,2]", unary([](T a) { return transpose(a, 0, 2); }), cube);
  c.add("transpose_noncontig", "back to row-major: a transposed leaf, dims 0, 1",
        unary([](T a) { return transpose(a, 0, 1); }), tr);
  c.add("permute", "{1, 2, 0} of [2,3,2]", unary([](T a) { return permute(a, {1, 2, 0}); }),
        cube);
  c.add("permute_negative", "{-1, 0, 1} of [2,3,2]",
        unary([](T a) { return permute(a, {-1, 0, 1}); }), cube);
  c.add("reshape", "[2,3,2] -> [4,-1] (a view)", unary([](T a) { return reshape(a, {4, -1}); }),
        cube);
  c.add("reshape_noncontig", "transposed [3,4] -> [12] (a copy)",
        unary([](T a) { return reshape(a, {12}); }), tr);
  c.add("view", "[2,3,2] -> [6,2]", unary([](T a) { return view(a, {6, 2}); }), cube);
  c.add("expand", "[3,1] -> [2,3,4]", unary([](T a) { return expand(a, {2, 3, 4}); }),
        {dense({3, 1})});
  c.add("squeeze", "all size-1 dims of [1,3,1,2]", unary([](T a) { return squeeze(a); }),
        {dense({1, 3, 1, 2})});
  c.add("squeeze_dim", "dim -1 of [2,3,1]", unary([](T a) { return squeeze(a, -1); }),
        {dense({2, 3, 1})});
  c.add("unsqueeze", "dim 1 of [2,3]", unary([](T a) { return unsqueeze(a, 1); }),
        {dense({2, 3})});
  c.add("unsqueeze_noncontig", "dim 2 of a transposed [3,4] leaf",
        unary([](T a) { return unsqueeze(a, 2); }), tr);
  c.add("slice", "dim 1, [0, 4) step 2 of [3,4]",
        unary([](T a) { return slice(a, 1, 0, 4, 2); }), m34);
  c.add("slice_negative", "dim -1, [-3, -1) of [3,4]",
        unary([](T a) { return slice(a, -1, -3, -1); }), m34);
  c.add("slice_noncontig", "dim 0, [1, 3) of a transposed [3,4] leaf",
        unary([](T a) { return slice(a, 0, 1, 3); }), tr);
  c.add("narrow", "dim 1, start 1, length 2 of [3,4]",
        unary([](T a) { return narrow(a, 1, 1, 2); }), m34);
  c.add("narrow_noncontig", "dim 0, start 1, length 2 of an every-other-column [3,2] leaf",
        unary([](T a) { return narrow(a, 0, 1, 2); }), {strided({3, 2})});
  c.add("cat", "[2,3] and [1,3] along dim 0", binary([](T a, T b) { return cat({a, b}); }),
        {dense({2, 3}), dense({1, 3})});
  c.add("cat_dim1", "[2,3] and a transposed [2,2] leaf along dim -1",
        binary([](T a, T b) { return cat({a, b}, -1); }), {dense({2, 3}), transposed({2, 2})});
  c.add("cat_repeated", "{a, b, a} along dim 0: a's gradient accumulates",
        binary([](T a, T b) { return cat({a, b, a}); }), {dense({2, 2}), dense({1, 2})});
  // Not gradgradchecked: gradgradcheck perturbs the float64 grad_output by eps, and the
  // float32 input's gradient rounds it to float32 (the first-order check is exact).
  c.add("cat_promote", "float64 [2,2] and a float32 [1,2] (tiny values): float64",
        binary([](T a, T b) { return cat({a, to(b, DType::kFloat32)}); }),
        {dense({2, 2}), dense({1, 2}, kTiny)}, /*twice=*/false);
  c.add("stack", "two [2,3] along dim 0", binary([](T a, T b) { return stack({a, b}); }),
        {dense({2, 3}), dense({2, 3})});
  c.add("stack_dim2", "[2,3] and a transposed [2,3] leaf along dim 2",
        binary([](T a, T b) { return stack({a, b}, 2); }), {dense({2, 3}), transposed({2, 3})});
  c.add("stack_repeated", "{a, a} along dim -1", unary([](T a) { return stack({a, a}, -1); }),
        {dense({2, 3})});
  c.add("stack_three", "[2,3], an every-other-column and a transposed [2,3] leaf along dim 1",
        [](const TensorList& x) { return TensorList{stack({x[0], x[1], x[2]}, 1)}; },
        {dense({2, 3}), strided({2, 3}), transposed({2, 3})});
  c.add("stack_promote", "a float32 (tiny values) and a float64 [2,2] along dim 1: float64",
        binary([](T a, T b) { return stack({to(a, DType::kFloat32), b}, 1); }),
        {dense({2, 2}, kTiny), dense({2, 2})}, /*twice=*/false);  // as cat_promote
  c.add("stack_scalars", "two 0-dim tensors along dim -1",
        binary([](T a, T b) { return stack({a, b}, -1); }), {dense({}), dense({})});
  c.add("stack_partial_grad", "{a, constant, a} along dim -2: the constant needs no gradient",
        unary([](T a) { return stack({a, full_like(a, 0.5), a}, -2); }), {dense({3, 2})});
  c.add("cat_partial_grad", "{a, constant} along dim 1, a every other column",
        unary([](T a) { return cat({a, full_like(a, 0.5)}, 1); }), {strided({2, 3})});
  const Fn select1 = binary([](T a, T i) { return index_select(a, 1, i); });
  c.add("index_select", "dim 1 of [3,4], index {3, 0, 3, 1} (repeats accumulate)", select1,
        {dense({3, 4}), indices({3, 0, 3, 1})});
  c.add("index_select_dim0", "dim 0 of [3,4], index {2, 2, 0}",
        binary([](T a, T i) { return index_select(a, 0, i); }),
        {dense({3, 4}), indices({2, 2, 0})});
  c.add("index_select_noncontig", "dim 1 of a transposed [3,4] leaf, index {1, 3}", select1,
        {transposed({3, 4}), indices({1, 3})});
  c.add("clone", "[2,3]", unary([](T a) { return clone(a); }), {dense({2, 3})});
  c.add("clone_noncontig", "every-other-column leaf", unary([](T a) { return clone(a); }),
        {strided({2, 3})});
  c.add("contiguous", "transposed [3,4] leaf (a real copy)",
        unary([](T a) { return contiguous(a); }), tr);
  c.add("contiguous_noop", "contiguous [2,3] leaf: the output is the input itself",
        unary([](T a) { return contiguous(a); }), {dense({2, 3})});
}

void devices_and_dtypes(Catalogue& c) {
  c.add("to_device", "to(peer_device): sim:0 -> sim:1, cpu -> sim:0",
        unary([](T a) { return to(a, peer_device(a.device())); }), {dense({2, 3})});
  c.add("to_device_roundtrip", "to the peer device, * 2 there, and back",
        unary([](T a) { return to(mul(to(a, peer_device(a.device())), 2.0), a.device()); }),
        {dense({2, 3})});
  c.add("to_device_nonblocking", "non_blocking there and back, transposed leaf",
        unary([](T a) { return to(to(a, peer_device(a.device()), true), a.device(), true); }),
        {transposed({2, 3})});
  c.add("to_dtype", "float64 -> float32, |a| < 7e-6 (float32 rounding stays small)",
        unary([](T a) { return to(a, DType::kFloat32); }), {dense({2, 3}, kTiny)});
}

// In place, wrapped: the leaf is cloned and the clone modified, so gradients reach it.
void in_place(Catalogue& c) {
  const Maker pair = {dense({2, 3}), dense({2, 3})};
  const Maker row = {dense({2, 3}), dense({3})};
  const Maker one = {dense({2, 3})};
  c.add("add_", "clone(a).add_(b, 0.5)",
        binary([](T a, T b) { Tensor t = clone(a); return add_(t, b, 0.5); }), pair);
  c.add("add__broadcast", "clone(a [2,3]).add_(b [3], -1)",
        binary([](T a, T b) { Tensor t = clone(a); return add_(t, b, -1.0); }), row);
  c.add("mul_", "clone(a).mul_(b)",
        binary([](T a, T b) { Tensor t = clone(a); return mul_(t, b); }), pair);
  c.add("mul__broadcast", "clone(a [2,3]).mul_(b [3])",
        binary([](T a, T b) { Tensor t = clone(a); return mul_(t, b); }), row);
  c.add("mul__self", "t = clone(a); t.mul_(t): t squared through aliasing",
        unary([](T a) { Tensor t = clone(a); return mul_(t, t); }), one);
  c.add("mul__cpu_scalar", "clone(a [2,3]).mul_(to(0-dim b, cpu))",
        binary([](T a, T b) { Tensor t = clone(a); return mul_(t, to(b, Device("cpu"))); }),
        {dense({2, 3}), dense({})});
  c.add("mul__scalar", "clone(a).mul_(-3)",
        unary([](T a) { Tensor t = clone(a); return mul_(t, -3.0); }), one);
  c.add("zero_", "clone(a).zero_(): a's gradient is zero",
        unary([](T a) { Tensor t = clone(a); return zero_(t); }), one);
  c.add("zero__then_add_", "t = clone(a); t.zero_(); t.add_(b): a gets 0, b gets 1",
        binary([](T a, T b) { Tensor t = clone(a); zero_(t); return add_(t, b); }), pair);
  c.add("fill_", "t = clone(a); t.fill_(2.5); t.mul_(b): a gets 0, b gets 2.5",
        binary([](T a, T b) { Tensor t = clone(a); fill_(t, 2.5); return mul_(t, b); }), pair);
  c.add("copy_", "clone(a).copy_(b): a gets 0, b gets 1",
        binary([](T a, T b) { Tensor t = clone(a); return copy_(t, b); }), pair);
  c.add("copy__broadcast", "clone(a [2,3]).copy_(b [3])",
        binary([](T a, T b) { Tensor t = clone(a); return copy_(t, b); }), row);
  c.add("copy__noncontig", "clone(a [2,3]).copy_(transposed leaf)",
        binary([](T a, T b) { Tensor t = clone(a); return copy_(t, b); }),
        {dense({2, 3}), transposed({2, 3})});
  c.add("copy__device", "clone(a).copy_(to(3 b, peer_device)): the source on another device",
        binary([](T a, T b) {
          Tensor t = clone(a);
          return copy_(t, to(mul(b, 3.0), peer_device(b.device())));
        }),
        pair);
}

}  // namespace catalogue_internal

namespace {

std::vector<OpSpec> build() {
  using namespace catalogue_internal;  // NOLINT
  Catalogue c;
  arithmetic(c);
  math(c);
  compare_select(c);
  reductions(c);
  linear_algebra(c);
  shapes(c);
  devices_and_dtypes(c);
  in_place(c);
  conv_pool_norm(c);
  losses_activations(c);
  statistics_and_masks(c);
  sort_sample_pad(c);
  return c.take();
}

}  // namespace

const std::vector<OpSpec>& op_catalogue() {
  static const std::vector<OpSpec> catalogue = build();
  return catalogue;
}

const OpSpec* find_op(const std::string& name) {
  for (const OpSpec& op : op_catalogue()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

Device peer_device(Device d) {
  if (d.is_cpu()) return try_device(DeviceType::kSim, 0);
  for (const Device& other : all_devices(d.type())) {
    if (!other.is_cpu() && other != d) return other;
  }
  return Device("cpu");
}

}  // namespace streamgrad

// The catalogue's entries for comparisons, where and masked_fill / masked_fill_
// (gradcheck/catalogue.h). A comparison has no gradient: its entries check it through the
// where it feeds (each picks between two differentiable branches, away from ties), so a
// wrong mask shows up as a wrong value or gradient. Masks are fixed bool inputs.
#include "gradcheck/catalogue_internal.h"

namespace streamgrad {
namespace catalogue_internal {
namespace {

Tensor on_cpu(T t) { return to(t, Device("cpu")); }

void comparisons(Catalogue& c) {
  const Maker pair = {dense({2, 3}), dense({2, 3})};
  const Maker kinkfree = {dense({2, 3}, kKinkFree)};
  const In m1 = mask({2, 3}, {1, 0, 1, 1, 0, 0});
  const In m2 = mask({2, 3}, {1, 1, 0, 1, 0, 1});
  c.add("eq", "where(eq(bool m1, bool m2), a, b): bool operands",
        Fn([](const TensorList& x) { return TensorList{where(eq(x[0], x[1]), x[2], x[3])}; }),
        {m1, m2, dense({2, 3}), dense({2, 3})});
  c.add("eq_scalar", "where(eq(int64 i [2,3], 2), a, -a)",
        binary([](T a, T i) { return where(eq(reshape(i, {2, 3}), 2.0), a, neg(a)); }),
        {dense({2, 3}), indices({2, 0, 2, 1, 3, 2})});
  c.add("ne", "where(ne(int64 i [2,3], int64 j [3]) broadcast, a, 2a)",
        Fn([](const TensorList& x) {
          return TensorList{where(ne(reshape(x[1], {2, 3}), x[2]), x[0], mul(x[0], 2.0))};
        }),
        {dense({2, 3}), indices({0, 1, 2, 2, 1, 0}), indices({0, 1, 0})});
  c.add("ne_scalar", "where(ne(bool m, 0), a, b): a bool tensor against a scalar",
        Fn([](const TensorList& x) { return TensorList{where(ne(x[0], 0.0), x[1], x[2])}; }),
        {m1, dense({2, 3}), dense({2, 3})});
  c.add("lt", "where(lt(a, b), a, b): the element-wise minimum",
        binary([](T a, T b) { return where(lt(a, b), a, b); }), pair);
  c.add("lt_scalar", "where(lt(a, 0), 0.2 a, a), |a| >= 0.1",
        unary([](T a) { return where(lt(a, 0.0), mul(a, 0.2), a); }), kinkfree);
  c.add("le", "where(le(a [2,3], b [3]), b, a): the maximum, broadcast",
        binary([](T a, T b) { return where(le(a, b), b, a); }), {dense({2, 3}), dense({3})});
  c.add("le_scalar", "where(le(a, 0), exp(a), a + 1), |a| >= 0.1",
        unary([](T a) { return where(le(a, 0.0), exp(a), add(a, 1.0)); }), kinkfree);
  c.add("gt", "where(gt(a, b), a b, a): transposed and every-other-column leaves",
        binary([](T a, T b) { return where(gt(a, b), mul(a, b), a); }),
        {transposed({2, 3}), strided({2, 3})});
  c.add("gt_scalar", "where(gt(a, 0), a, 0.1 a): leaky relu, |a| >= 0.1",
        unary([](T a) { return where(gt(a, 0.0), a, mul(a, 0.1)); }), kinkfree);
  c.add("ge", "where(ge(a, to(0-dim b, cpu)), a, to(b, cpu)): cpu scalars",
        binary([](T a, T b) { return where(ge(a, on_cpu(b)), a, on_cpu(b)); }),
        {dense({2, 3}), dense({})});
  c.add("ge_scalar", "where(ge(a, 0), a^2, -a), |a| >= 0.1",
        unary([](T a) { return where(ge(a, 0.0), mul(a, a), neg(a)); }), kinkfree);
}

void selection(Catalogue& c) {
  const In m = mask({2, 3}, {1, 0, 0, 1, 1, 0});
  const In row = mask({3}, {1, 0, 1});
  const Fn where3 =
      Fn([](const TensorList& x) { return TensorList{where(x[0], x[1], x[2])}; });
  c.add("where", "condition [2,3], input [2,3], other [2,3]", where3,
        {m, dense({2, 3}), dense({2, 3})});
  c.add("where_broadcast", "condition [3], input [2,1], other [2,3] -> [2,3]", where3,
        {row, dense({2, 1}), dense({2, 3})});
  c.add("where_noncontig", "transposed input, every-other-column other", where3,
        {m, transposed({2, 3}), strided({2, 3})});
  c.add("where_cpu_scalar", "where(m, a, to(0-dim b, cpu))",
        Fn([](const TensorList& x) { return TensorList{where(x[0], x[1], on_cpu(x[2]))}; }),
        {m, dense({2, 3}), dense({})});
  c.add("where_promote", "float32 input (tiny values) beside a 0-dim float64 other: float32",
        Fn([](const TensorList& x) {
          return TensorList{where(x[0], to(x[1], DType::kFloat32), x[2])};
        }),
        {m, dense({2, 3}, kTiny), dense({}, kTiny)});
  c.add("where_same", "where(m, a, a): both branches from one leaf, gradients accumulate",
        Fn([](const TensorList& x) { return TensorList{where(x[0], x[1], x[1])}; }),
        {m, dense({2, 3})});
  const Fn fill_tensor =
      Fn([](const TensorList& x) { return TensorList{masked_fill(x[0], x[1], x[2])}; });
  c.add("masked_fill", "input [2,3], mask [2,3], 0-dim value", fill_tensor,
        {dense({2, 3}), m, dense({})});
  c.add("masked_fill_broadcast", "input [3], mask [2,3], 0-dim value -> [2,3]", fill_tensor,
        {dense({3}), m, dense({})});
  c.add("masked_fill_scalar", "input [2,3], mask [3], value -1.5",
        Fn([](const TensorList& x) { return TensorList{masked_fill(x[0], x[1], -1.5)}; }),
        {dense({2, 3}), row});
  c.add("masked_fill_cpu_value", "masked_fill(a, m, to(0-dim v, cpu))",
        Fn([](const TensorList& x) { return TensorList{masked_fill(x[0], x[1], on_cpu(x[2]))}; }),
        {dense({2, 3}), m, dense({})});
  c.add("masked_fill_", "clone(a [2,3]).masked_fill_(mask [3], 0-dim v)",
        Fn([](const TensorList& x) {
          Tensor t = clone(x[0]);
          return TensorList{masked_fill_(t, x[1], x[2])};
        }),
        {dense({2, 3}), row, dense({})});
  c.add("masked_fill__scalar", "clone(a).masked_fill_(mask [2,3], 2.5)",
        Fn([](const TensorList& x) {
          Tensor t = clone(x[0]);
          return TensorList{masked_fill_(t, x[1], 2.5)};
        }),
        {dense({2, 3}), m});
  c.add("masked_fill__cpu_value", "clone(a).masked_fill_(m, to(0-dim v, cpu))",
        Fn([](const TensorList& x) {
          Tensor t = clone(x[0]);
          return TensorList{masked_fill_(t, x[1], on_cpu(x[2]))};
        }),
        {dense({2, 3}), m, dense({})});
}

}  // namespace

void compare_select(Catalogue& c) {
  comparisons(c);
  selection(c);
}

}  // namespace catalogue_internal
}  // namespace streamgrad

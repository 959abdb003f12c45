// Issue 24: operator behaviours that used to differ from the reference framework, on cpu
// and sim:0 — the mean of a loss whose targets are all ignored, type promotion in where
// and cat / stack, broadcasting in mse_loss, unbatched classification losses, scatter_add
// with a src larger than its index, and ceil_mode in average and max pooling. Gradients
// against central differences (tests/ops/finite_difference.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/base/warning.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::check_gradients;
using testing::check_second_order;
using testing::check_values;
using testing::f64;
using testing::input;
using testing::random_input;
using testing::test_device;
using testing::values;

Tensor targets(const std::vector<int64_t>& v, Shape shape, Device d) {
  return from_vector<int64_t>(v, shape, TensorOptions().dtype(DType::kInt64).device(d));
}

Tensor mask(const std::vector<bool>& v, Shape shape, Device d) {
  return from_vector<bool>(v, shape, TensorOptions().dtype(DType::kBool).device(d));
}

// ---- item 20: every target ignored ----------------------------------------------------

TEST_CASE("a mean loss over targets that are all ignored is NaN with a zero gradient",
          "[ops][loss][conformance]") {
  const Device d = test_device();
  const Tensor x = random_input({3, 4}, d, 1);
  const Tensor t = targets({-100, -100, -100}, {3}, d);
  const double smoothing = GENERATE(0.0, 0.3);
  INFO("label_smoothing " << smoothing);
  CrossEntropyOptions ce;
  ce.label_smoothing = smoothing;
  const Tensor losses[] = {cross_entropy(x, t, ce), nll_loss(log_softmax(x, 1), t)};
  for (const Tensor& loss : losses) {
    CHECK(loss.dim() == 0);
    CHECK(std::isnan(values(loss)[0]));  // the reference's forward: 0 / 0
    const TensorList g = grad({loss}, {x});
    // The reference's backward writes nothing for ignored targets: zeros, not NaN.
    check_values(g[0], std::vector<double>(12, 0.0));
  }
  // Sum: 0, and a zero gradient.
  ce.reduction = Reduction::kSum;
  const Tensor total = cross_entropy(x, t, ce);
  CHECK(values(total)[0] == 0);
  check_values(grad({total}, {x})[0], std::vector<double>(12, 0.0));
}

TEST_CASE("a mean loss with some targets ignored keeps its gradient", "[ops][loss][conformance]") {
  const Device d = test_device();
  const Tensor t = targets({2, -100, 0}, {3}, d);
  check_gradients([&](const TensorList& in) { return cross_entropy(in[0], t); },
                  {random_input({3, 4}, d, 2)});
  check_second_order([&](const TensorList& in) { return nll_loss(in[0], t); },
                     {random_input({3, 4}, d, 3)});
}

// ---- item 21: promotion in where, cat and stack ---------------------------------------

TEST_CASE("where promotes floating operands, a 0-dim one deferring to a dimensioned one",
          "[ops][where][conformance]") {
  const Device d = test_device();
  const Tensor c = mask({true, false, true, false, false, true}, {2, 3}, d);
  Tensor x = to(random_input({2, 3}, d, 4).detach(), DType::kFloat32).requires_grad_();
  Tensor s = input({0.25}, {}, d);  // float64, 0-dim
  const Tensor y = where(c, x, s);
  CHECK(y.dtype() == DType::kFloat32);
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  const std::vector<bool> cv = {true, false, true, false, false, true};
  for (size_t i = 0; i < 6; ++i) CHECK(yv[i] == (cv[i] ? xv[i] : 0.25f));
  const TensorList g = grad({sum(y)}, {x, s});
  CHECK(g[0].dtype() == DType::kFloat32);
  CHECK(g[1].dtype() == DType::kFloat64);
  CHECK(g[1].dim() == 0);
  CHECK(values(g[1])[0] == 3);  // three positions take `other`
  // Both dimensioned: the wider dtype wins; both 0-dim: likewise.
  CHECK(where(c, x, random_input({2, 3}, d, 5)).dtype() == DType::kFloat64);
  const Tensor c0 = mask({false}, {}, d);
  CHECK(where(c0, to(s, DType::kFloat32), s).dtype() == DType::kFloat64);
  // A 0-dim cpu float64 beside a float32 operand on another device acts as a scalar.
  if (!d.is_cpu()) {
    const Tensor on_cpu = input({0.5}, {}, Device("cpu"));
    const Tensor z = where(c, x, on_cpu);
    CHECK(z.dtype() == DType::kFloat32);
    CHECK(z.device() == d);
    CHECK(grad({sum(z)}, {on_cpu})[0].device() == Device("cpu"));
  }
  // Exactly representable steps: the float32 rounding inside is exact.
  check_gradients(
      [&](const TensorList& in) { return where(c, to(in[0], DType::kFloat32), in[1]); },
      {input({0.5, -0.25, 1, 2, -1, 0.75}, {2, 3}, d), input({0.125}, {}, d)}, 1.0 / 1024);
  // Integer beside floating stays an error naming where.
  CHECK_THROWS_WITH(where(c, x, targets({1}, {}, d)), Catch::Contains("where"));
}

TEST_CASE("cat and stack of mixed floating dtypes promote, each gradient in its own dtype",
          "[ops][join][conformance]") {
  const Device d = test_device();
  Tensor a = to(random_input({2, 2}, d, 6).detach(), DType::kFloat32).requires_grad_();
  Tensor b = random_input({1, 2}, d, 7);
  const Tensor y = cat({a, b}, 0);
  CHECK(y.dtype() == DType::kFloat64);
  CHECK(y.sizes() == Shape{3, 2});
  std::vector<double> want;
  for (float v : a.to_vector<float>()) want.push_back(v);
  for (double v : values(b)) want.push_back(v);
  check_values(y, want, 0);
  const Tensor w = input({1, 2, 3, 4, 5, 6}, {3, 2}, d, false);
  const TensorList g = grad({sum(mul(y, w))}, {a, b});
  CHECK(g[0].dtype() == DType::kFloat32);
  CHECK(g[0].to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(g[1].dtype() == DType::kFloat64);
  check_values(g[1], {5, 6});
  // float16 and bfloat16 meet in float32.
  const Tensor h = to(a.detach(), DType::kFloat16), bf = to(a.detach(), DType::kBFloat16);
  CHECK(cat({h, bf}, 1).dtype() == DType::kFloat32);
  const Tensor s = stack({a, to(a.detach(), DType::kFloat64)}, 0);
  CHECK(s.dtype() == DType::kFloat64);
  CHECK(s.sizes() == Shape{2, 2, 2});
  CHECK(grad({sum(s)}, {a})[0].dtype() == DType::kFloat32);
  check_gradients(
      [&](const TensorList& in) { return cat({to(in[0], DType::kFloat32), in[1]}, 1); },
      {input({0.5, -0.25, 1, 2}, {2, 2}, d), random_input({2, 1}, d, 8)}, 1.0 / 1024);
  // Shapes are still checked before anything is converted; int64 does not mix in.
  CHECK_THROWS_WITH(cat({a, random_input({1, 3}, d, 9)}, 0), Catch::Contains("cat: tensor 1"));
  CHECK_THROWS_WITH(cat({a, targets({1, 2}, {1, 2}, d)}, 0), Catch::Contains("one dtype"));
}

// ---- item 21: mse_loss broadcasting ----------------------------------------------------

TEST_CASE("mse_loss broadcasts shapes that differ, with a warning", "[ops][loss][conformance]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3}, d, 10), t = random_input({3}, d, 11);
  Tensor loss;
  {
    WarningCollector warnings;
    loss = mse_loss(x, t);
    REQUIRE(warnings.warnings().size() == 1);
    const std::string& w = warnings.warnings()[0].message;
    CHECK(w.find("mse_loss") != std::string::npos);
    CHECK(w.find("[3]") != std::string::npos);
    CHECK(w.find("[2, 3]") != std::string::npos);
  }
  const std::vector<double> xv = values(x), tv = values(t);
  double want = 0;
  for (int i = 0; i < 6; ++i) want += std::pow(xv[i] - tv[i % 3], 2) / 6;
  CHECK(values(loss)[0] == Approx(want));
  {
    WarningCollector warnings;  // keeps the expected warnings off stderr
    CHECK(mse_loss(x, t, Reduction::kNone).sizes() == Shape{2, 3});
    check_gradients([](const TensorList& in) { return mse_loss(in[0], in[1]); },
                    {random_input({2, 1}, d, 12), random_input({3}, d, 13)});
  }
  {
    WarningCollector warnings;
    mse_loss(x, random_input({2, 3}, d, 14));  // equal shapes: no warning
    CHECK(warnings.warnings().empty());
  }
  CHECK_THROWS_WITH(mse_loss(x, random_input({4}, d, 15)), Catch::StartsWith("mse_loss:"));
}

// ---- item 21: unbatched classification losses -----------------------------------------

TEST_CASE("cross_entropy and nll_loss take an unbatched [C] input and a 0-dim target",
          "[ops][loss][conformance]") {
  const Device d = test_device();
  const Tensor x = random_input({4}, d, 16, -2, 2);
  const Tensor t = targets({2}, {}, d);
  const Tensor xb = reshape(x, {1, 4});
  const Tensor tb = targets({2}, {1}, d);
  for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    CrossEntropyOptions ce;
    ce.reduction = r;
    ce.label_smoothing = 0.1;
    const Tensor loss = cross_entropy(x, t, ce);
    CHECK(loss.dim() == 0);  // 0-dim for every reduction, as the reference
    CHECK(values(loss)[0] == Approx(values(cross_entropy(xb, tb, ce))[0]));
    NllLossOptions nl;
    nl.reduction = r;
    CHECK(nll_loss(x, t, nl).dim() == 0);
    CHECK(values(nll_loss(x, t, nl))[0] == Approx(-values(x)[2]));
  }
  check_gradients([&](const TensorList& in) { return cross_entropy(in[0], t); },
                  {random_input({4}, d, 17)});
  check_second_order([&](const TensorList& in) { return cross_entropy(in[0], t); },
                     {random_input({4}, d, 18)});
  // The one target ignored: NaN mean, zero sum and per-sample loss.
  const Tensor ignored = targets({-100}, {}, d);
  CHECK(std::isnan(values(cross_entropy(x, ignored))[0]));
  NllLossOptions none;
  none.reduction = Reduction::kNone;
  CHECK(values(nll_loss(x, ignored, none))[0] == 0);
  // A [C] input with a 1-D target is refused, naming the loss.
  CHECK_THROWS_WITH(cross_entropy(x, tb), Catch::StartsWith("cross_entropy:"));
}

// ---- item 21: scatter_add with a larger src -------------------------------------------

TEST_CASE("scatter_add reads only the part of src that index covers", "[ops][index][conformance]") {
  const Device d = test_device();
  const Tensor self = random_input({2, 4}, d, 19);
  const Tensor src = random_input({3, 3}, d, 20);
  const Tensor index = targets({3, 0, 1, 3}, {2, 2}, d);
  const Tensor y = scatter_add(self, 1, index, src);
  std::vector<double> want = values(self);
  const std::vector<double> sv = values(src);
  const int64_t idx[2][2] = {{3, 0}, {1, 3}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) want[i * 4 + idx[i][j]] += sv[i * 3 + j];
  check_values(y, want);
  const TensorList g = grad({sum(y)}, {self, src});
  // src's elements outside index's [2, 2] corner are never read: zero gradient.
  check_values(g[1], {1, 1, 0, 1, 1, 0, 0, 0, 0});
  check_gradients([&](const TensorList& in) { return scatter_add(in[0], 1, index, in[1]); },
                  {self, src});
  check_second_order([&](const TensorList& in) { return scatter_add(in[0], 1, index, in[1]); },
                     {self, src});
  CHECK_THROWS_WITH(scatter_add(self, 1, index, random_input({2, 1}, d, 21)),
                    Catch::Contains("at least as large as index"));
}

// ---- item 21: ceil_mode in pooling -----------------------------------------------------

// The reference's average pooling of one [H, W] plane: each window clipped to the padded
// input for the divisor (count_include_pad) and to the input for the sum.
std::vector<double> naive_avg_pool(const std::vector<double>& x, int64_t h, int64_t w,
                                   const Pool2dParams& p, int64_t oh, int64_t ow) {
  std::vector<double> out;
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t j = 0; j < ow; ++j) {
      int64_t h0 = i * p.stride[0] - p.padding[0], w0 = j * p.stride[1] - p.padding[1];
      int64_t h1 = std::min(h0 + p.kernel_size[0], h + p.padding[0]);
      int64_t w1 = std::min(w0 + p.kernel_size[1], w + p.padding[1]);
      const int64_t padded = (h1 - h0) * (w1 - w0);
      h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
      h1 = std::min(h1, h), w1 = std::min(w1, w);
      double s = 0;
      for (int64_t y = h0; y < h1; ++y)
        for (int64_t z = w0; z < w1; ++z) s += x[y * w + z];
      out.push_back(s / (p.count_include_pad ? padded : (h1 - h0) * (w1 - w0)));
    }
  return out;
}

TEST_CASE("avg_pool2d with ceil_mode follows the reference's windows and divisors",
          "[ops][pool][conformance]") {
  const Device d = test_device();
  struct Case {
    int64_t h, w, k, s, pad;
    int64_t oh, ow;  // the reference's output size
  };
  const Case cases[] = {
      {5, 5, 2, 2, 0, 3, 3},  // last window half outside
      {6, 5, 3, 2, 1, 4, 3},  // padding, and a window past the right padding
      {5, 5, 2, 2, 1, 3, 3},  // the rounded-up window would start in the right padding
      {1, 3, 2, 2, 0, 1, 2},  // only rounding up gives a row
  };
  for (const Case& c : cases) {
    for (bool include_pad : {true, false}) {
      Pool2dParams p;
      p.kernel_size = {c.k, c.k};
      p.stride = {c.s, c.s};
      p.padding = {c.pad, c.pad};
      p.ceil_mode = true;
      p.count_include_pad = include_pad;
      INFO(c.h << "x" << c.w << " k " << c.k << " s " << c.s << " pad " << c.pad
                << " count_include_pad " << include_pad);
      const Tensor x = random_input({1, 1, c.h, c.w}, d, 22);
      const Tensor y = avg_pool2d(x, p);
      REQUIRE(y.sizes() == Shape{1, 1, c.oh, c.ow});
      check_values(y, naive_avg_pool(values(x), c.h, c.w, p, c.oh, c.ow));
      check_gradients([&](const TensorList& in) { return avg_pool2d(in[0], p); }, {x});
    }
  }
  Pool2dParams p;
  p.kernel_size = {2, 2};
  p.ceil_mode = true;
  check_second_order([&](const TensorList& in) { return avg_pool2d(in[0], p); },
                     {random_input({2, 3, 3}, d, 23)});
}

TEST_CASE("max_pool2d with ceil_mode gives an output where only rounding up gives one",
          "[ops][pool][conformance]") {
  const Device d = test_device();
  const Tensor x = random_input({1, 1, 3, 3}, d, 24, -2, 2, 0.05);
  Pool2dParams p;
  p.kernel_size = {4, 4};
  p.stride = {2, 2};
  CHECK_THROWS_WITH(max_pool2d(x, p), Catch::Contains("does not fit"));  // floor: none
  p.ceil_mode = true;
  const auto [v, i] = max_pool2d_with_indices(x, p);
  REQUIRE(v.sizes() == Shape{1, 1, 1, 1});
  const std::vector<double> xv = values(x);
  const auto at = std::max_element(xv.begin(), xv.end());
  CHECK(values(v)[0] == *at);
  CHECK(i.to_vector<int64_t>()[0] == at - xv.begin());
  check_gradients([&](const TensorList& in) { return max_pool2d(in[0], p); }, {x});
  // A 1x1 image under a 2x2 stride-2 window: one output in ceil mode.
  Pool2dParams q;
  q.kernel_size = {2, 2};
  q.ceil_mode = true;
  CHECK(max_pool2d(random_input({2, 1, 1}, d, 25), q).sizes() == Shape{2, 1, 1});
}

}  // namespace
}  // namespace streamgrad

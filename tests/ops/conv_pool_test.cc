// conv2d, unfold/fold, max and average pooling and batch_norm: forward values against
// naive loops written here, on cpu and sim:0, and the errors PyTorch raises for the same
// misuse. Gradients are covered by the catalogue (gradcheck, gradgradcheck, streams).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::check_second_order;
using testing::KernelNames;
using testing::random_input;
using testing::test_device;
using testing::values;

// Reference conv2d on [N, C, H, W] float64 values.
std::vector<double> naive_conv(const std::vector<double>& x, Shape xs, const std::vector<double>& w,
                               Shape ws, const std::vector<double>& b, const Conv2dParams& p,
                               int64_t oh, int64_t ow) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], o = ws[0], cg = ws[1];
  const int64_t per_group = o / p.groups;
  std::vector<double> out(n * o * oh * ow, 0);
  for (int64_t in = 0; in < n; ++in)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b.empty() ? 0 : b[oc];
          const int64_t g = oc / per_group;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ki = 0; ki < ws[2]; ++ki)
              for (int64_t kj = 0; kj < ws[3]; ++kj) {
                const int64_t y = i * p.stride[0] - p.padding[0] + ki * p.dilation[0];
                const int64_t z = j * p.stride[1] - p.padding[1] + kj * p.dilation[1];
                if (y < 0 || y >= h || z < 0 || z >= wd) continue;
                acc += x[((in * c + g * cg + ci) * h + y) * wd + z] *
                       w[((oc * cg + ci) * ws[2] + ki) * ws[3] + kj];
              }
          out[((in * o + oc) * oh + i) * ow + j] = acc;
        }
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-9) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(tol));
  }
}

TEST_CASE("conv2d matches a direct convolution", "[ops][conv]") {
  const Device d = test_device();
  struct Case {
    Shape x, w;
    Conv2dParams p;
    bool bias;
  };
  const Case cases[] = {
      {{2, 3, 5, 6}, {4, 3, 3, 3}, {}, true},
      {{1, 2, 7, 5}, {3, 2, 2, 3}, {{2, 1}, {1, 2}, {1, 1}, 1}, false},
      {{1, 2, 6, 6}, {2, 2, 3, 2}, {{1, 2}, {2, 0}, {2, 1}, 1}, true},  // dilation
      {{2, 4, 4, 4}, {6, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}, true},  // groups
  };
  uint64_t seed = 1;
  for (const Case& k : cases) {
    const Tensor x = random_input(k.x, d, seed++), w = random_input(k.w, d, seed++);
    const Tensor b = k.bias ? random_input({k.w[0]}, d, seed++) : Tensor();
    const Tensor y = conv2d(x, w, b, k.p);
    const int64_t oh = (k.x[2] + 2 * k.p.padding[0] - k.p.dilation[0] * (k.w[2] - 1) - 1) / k.p.stride[0] + 1;
    const int64_t ow = (k.x[3] + 2 * k.p.padding[1] - k.p.dilation[1] * (k.w[3] - 1) - 1) / k.p.stride[1] + 1;
    CHECK(y.sizes() == Shape{k.x[0], k.w[0], oh, ow});
    check_close(values(y), naive_conv(values(x), k.x, values(w), k.w,
                                      k.bias ? values(b) : std::vector<double>{}, k.p, oh, ow));
  }
}

TEST_CASE("conv2d accepts an unbatched [C, H, W] input", "[ops][conv]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 4, 4}, d, 3), w = random_input({3, 2, 3, 3}, d, 4);
  const Tensor y = conv2d(x, w);
  CHECK(y.sizes() == Shape{3, 2, 2});
  check_close(values(y), values(conv2d(unsqueeze(x, 0), w)));
}

TEST_CASE("fold sums overlapping windows and undoes unfold where windows tile", "[ops][conv]") {
  const Device d = test_device();
  const Tensor x = random_input({1, 2, 4, 4}, d, 5);
  // 2x2 windows with stride 2 tile the image: fold(unfold(x)) == x.
  Conv2dParams tile;
  tile.stride = {2, 2};
  check_close(values(fold(unfold(x, {2, 2}, tile), {4, 4}, {2, 2}, tile)), values(x));
  // Stride 1: each pixel is counted once per window that covers it.
  const Tensor ones_image = ones({1, 1, 3, 3}, TensorOptions().dtype(DType::kFloat64).device(d));
  const std::vector<double> counts = values(fold(unfold(ones_image, {2, 2}), {3, 3}, {2, 2}));
  check_close(counts, {1, 2, 1, 2, 4, 2, 1, 2, 1});
}

TEST_CASE("max_pool2d picks each window's maximum and its flat index", "[ops][pool]") {
  const Device d = test_device();
  const bool ceil = GENERATE(false, true);
  const Tensor x = random_input({2, 1, 5, 5}, d, 6, -2, 2, 0.01);
  Pool2dParams p;
  p.kernel_size = {2, 2};
  p.ceil_mode = ceil;
  const auto [v, i] = max_pool2d_with_indices(x, p);
  const int64_t o = ceil ? 3 : 2;
  REQUIRE(v.sizes() == Shape{2, 1, o, o});
  const std::vector<double> xv = values(x), vv = values(v);
  const std::vector<int64_t> iv = i.to_vector<int64_t>();
  for (int64_t plane = 0; plane < 2; ++plane)
    for (int64_t a = 0; a < o; ++a)
      for (int64_t b = 0; b < o; ++b) {
        double best = -INFINITY;
        int64_t at = -1;
        for (int64_t y = 2 * a; y < std::min<int64_t>(2 * a + 2, 5); ++y)
          for (int64_t z = 2 * b; z < std::min<int64_t>(2 * b + 2, 5); ++z)
            if (xv[plane * 25 + y * 5 + z] > best) best = xv[plane * 25 + y * 5 + z], at = y * 5 + z;
        CHECK(vv[(plane * o + a) * o + b] == best);
        CHECK(iv[(plane * o + a) * o + b] == at);
      }
}

TEST_CASE("max_pool2d propagates NaN and pads with -infinity", "[ops][pool]") {
  const Device d = test_device();
  const TensorOptions o = TensorOptions().dtype(DType::kFloat64).device(d);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector<double>({-5, nan, -7, -8}, {1, 1, 2, 2}, o);
  Pool2dParams p;
  p.kernel_size = {2, 2};
  CHECK(std::isnan(values(max_pool2d(x, p))[0]));
  p.kernel_size = {3, 3};
  p.stride = {1, 1};
  p.padding = {1, 1};
  const Tensor neg = from_vector<double>({-5, -6, -7, -8}, {1, 1, 2, 2}, o);
  check_close(values(max_pool2d(neg, p)), {-5, -5, -5, -5});  // never the zero padding
}

TEST_CASE("max_pool2d is one kernel each way; under create_graph its backward is scatter_add",
          "[ops][pool]") {
  const Device d = test_device();
  // Stride 1: windows overlap, so one input position can win twice.
  const Tensor x = random_input({2, 3, 4, 5}, d, 14, -2, 2, 0.01);
  const Tensor g = random_input({2, 3, 3, 4}, d, 15);
  Pool2dParams p;
  p.kernel_size = {2, 2};
  p.stride = {1, 1};
  Tensor y, i;
  TensorList grads;
  {
    KernelNames seen;
    std::tie(y, i) = max_pool2d_with_indices(x, p);
    CHECK(seen.names == std::vector<std::string>{"max_pool2d"});
    seen.names.clear();
    grads = grad({y}, {x}, {g});
    CHECK(seen.names == std::vector<std::string>{"max_pool2d_backward"});
  }
  // The gradient is g summed onto the winners' positions, per plane.
  const std::vector<double> gv = values(g);
  const std::vector<int64_t> iv = i.to_vector<int64_t>();
  std::vector<double> want(2 * 3 * 4 * 5, 0);
  for (size_t k = 0; k < gv.size(); ++k) want[(k / 12) * 20 + iv[k]] += gv[k];
  check_close(values(grads[0]), want);
  const TensorList again = grad({max_pool2d(x, p)}, {x}, {g}, /*retain_graph=*/true,
                                /*create_graph=*/true);
  CHECK(again[0].requires_grad());
  check_close(values(again[0]), want);
  check_second_order([&](const TensorList& in) { return max_pool2d(in[0], p); }, {x});
}

TEST_CASE("avg_pool2d averages windows, with or without the padding", "[ops][pool]") {
  const Device d = test_device();
  const TensorOptions o = TensorOptions().dtype(DType::kFloat64).device(d);
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, o);
  Pool2dParams p;
  p.kernel_size = {2, 2};
  p.stride = {2, 2};
  p.padding = {1, 1};
  // Windows: {1}, {2,3}, {4,7}, {5,6,8,9} with the zero padding counted (divide by 4) or not.
  check_close(values(avg_pool2d(x, p)), {0.25, 1.25, 2.75, 7});
  p.count_include_pad = false;
  check_close(values(avg_pool2d(x, p)), {1, 2.5, 5.5, 7});
}

// Channel c's batch mean and biased variance in the values of a [4, 2, 3] input.
std::pair<double, double> channel_stats(const std::vector<double>& xv, int64_t c) {
  double m = 0, v = 0;
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t k = 0; k < 3; ++k) m += xv[(n * 2 + c) * 3 + k] / 12;
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t k = 0; k < 3; ++k) v += std::pow(xv[(n * 2 + c) * 3 + k] - m, 2) / 12;
  return {m, v};
}

TEST_CASE("batch_norm normalises per channel and moves the running statistics", "[ops][norm]") {
  const Device d = test_device();
  const TensorOptions o = TensorOptions().dtype(DType::kFloat64).device(d);
  const Tensor x = random_input({4, 2, 3}, d, 8, -3, 3);
  Tensor rm = zeros({2}, o), rv = ones({2}, o);
  const Tensor w = from_vector<double>({2, 0.5}, {2}, o), b = from_vector<double>({1, -1}, {2}, o);
  const Tensor y = batch_norm(x, w, b, rm, rv, /*training=*/true, /*momentum=*/0.25, 1e-5);
  const std::vector<double> xv = values(x), yv = values(y);
  for (int64_t c = 0; c < 2; ++c) {
    const auto [m, v] = channel_stats(xv, c);
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t k = 0; k < 3; ++k) {
        const int64_t i = (n * 2 + c) * 3 + k;
        CHECK(yv[i] == Approx((xv[i] - m) / std::sqrt(v + 1e-5) * values(w)[c] + values(b)[c]));
      }
    // Running statistics move a quarter of the way, the variance unbiased (n / (n - 1)).
    CHECK(values(rm)[c] == Approx(0.25 * m));
    CHECK(values(rv)[c] == Approx(0.75 + 0.25 * v * 12 / 11));
  }
  // Eval uses the running statistics.
  const Tensor e = batch_norm(x, Tensor(), Tensor(), rm, rv, /*training=*/false);
  CHECK(values(e)[0] == Approx((xv[0] - values(rm)[0]) / std::sqrt(values(rv)[0] + 1e-5)));
}

TEST_CASE("batch_norm moves running statistics in its own launch, through strided buffers too",
          "[ops][norm]") {
  const Device d = test_device();
  const TensorOptions o = TensorOptions().dtype(DType::kFloat64).device(d);
  const Tensor x = random_input({4, 2, 3}, d, 9, -3, 3);
  Tensor rm = from_vector<double>({0.5, -1}, {2}, o), rv = from_vector<double>({2, 0.25}, {2}, o);
  // The same starting values in every other element of larger buffers.
  const Tensor rm_base = from_vector<double>({0.5, 7, -1, 7}, {4}, o);
  const Tensor rv_base = from_vector<double>({2, 7, 0.25, 7}, {4}, o);
  Tensor rm_strided = slice(rm_base, 0, 0, 4, 2), rv_strided = slice(rv_base, 0, 0, 4, 2);
  const uint32_t before = rm.version();
  {
    KernelNames seen;
    batch_norm(x, Tensor(), Tensor(), rm, rv, /*training=*/true, /*momentum=*/0.125, 1e-5);
    CHECK(seen.names == std::vector<std::string>{"batch_norm"});
  }
  CHECK(rm.version() != before);
  batch_norm(x, Tensor(), Tensor(), rm_strided, rv_strided, true, 0.125, 1e-5);
  const std::vector<double> xv = values(x);
  const double start_mean[2] = {0.5, -1}, start_var[2] = {2, 0.25};
  for (int64_t c = 0; c < 2; ++c) {
    const auto [m, v] = channel_stats(xv, c);
    const double want_mean = 0.875 * start_mean[c] + 0.125 * m;
    const double want_var = 0.875 * start_var[c] + 0.125 * v * 12 / 11;
    CHECK(values(rm)[c] == Approx(want_mean));
    CHECK(values(rv)[c] == Approx(want_var));
    CHECK(values(rm_strided)[c] == Approx(want_mean));
    CHECK(values(rv_strided)[c] == Approx(want_var));
  }
  // The elements between them are not touched.
  CHECK(values(rm_base)[1] == 7);
  CHECK(values(rv_base)[3] == 7);
}

TEST_CASE("batch_norm training is one kernel each way, with the composite's gradients",
          "[ops][norm]") {
  const Device d = test_device();
  const Tensor x = random_input({3, 2, 2, 2}, d, 10, -2, 2);
  const Tensor w = random_input({2}, d, 11), b = random_input({2}, d, 12);
  const Tensor g = random_input({3, 2, 2, 2}, d, 13);
  Tensor y;
  TensorList grads;
  {
    KernelNames seen;
    y = batch_norm(x, w, b, Tensor(), Tensor(), /*training=*/true);
    CHECK(seen.names == std::vector<std::string>{"batch_norm"});
    seen.names.clear();
    grads = grad({y}, {x, w, b}, {g});
    CHECK(seen.names == std::vector<std::string>{"batch_norm_backward"});
  }
  // The same values and gradients as batch_norm spelt out in ops.
  auto composite = [](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
    const Tensor c = sub(xx, mean(xx, {0, 2, 3}, true));
    const Tensor v = mean(mul(c, c), {0, 2, 3}, true);
    return add(mul(div(c, sqrt(add(v, 1e-5))), reshape(ww, {1, 2, 1, 1})),
               reshape(bb, {1, 2, 1, 1}));
  };
  const Tensor ref = composite(x, w, b);
  check_close(values(y), values(ref));
  const TensorList ref_grads = grad({ref}, {x, w, b}, {g});
  for (size_t i = 0; i < 3; ++i) check_close(values(grads[i]), values(ref_grads[i]));
  // Under create_graph the backward is written in ops: the same gradients, differentiable.
  const TensorList again = grad({batch_norm(x, w, b, Tensor(), Tensor(), true)}, {x, w, b}, {g},
                                /*retain_graph=*/true, /*create_graph=*/true);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(again[i].requires_grad());
    check_close(values(again[i]), values(ref_grads[i]));
  }
  check_second_order(
      [](const TensorList& in) {
        return batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), true);
      },
      {x, w, b});
}

TEST_CASE("convolution and pooling misuse is a clear ValueError", "[ops][errors]") {
  const Device d = test_device();
  const Tensor x = random_input({1, 3, 4, 4}, d, 9);
  CHECK_THROWS_WITH(conv2d(x, random_input({2, 2, 3, 3}, d, 1)), Catch::Contains("3 channels"));
  CHECK_THROWS_WITH(conv2d(x, random_input({2, 3, 5, 5}, d, 1)), Catch::Contains("does not fit"));
  Conv2dParams groups;
  groups.groups = 2;
  CHECK_THROWS_AS(conv2d(x, random_input({2, 2, 1, 1}, d, 1), Tensor(), groups), ValueError);
  CHECK_THROWS_WITH(conv2d(x, random_input({2, 3, 1, 1}, d, 1), random_input({3}, d, 2)),
                    Catch::Contains("bias"));
  Conv2dParams zero_stride;
  zero_stride.stride = {0, 1};
  CHECK_THROWS_WITH(unfold(x, {2, 2}, zero_stride), Catch::Contains("positive"));
  Pool2dParams p;
  p.kernel_size = {2, 2};
  p.padding = {2, 0};
  CHECK_THROWS_WITH(max_pool2d(x, p), Catch::Contains("half the kernel"));
  CHECK_THROWS_AS(max_pool2d(random_input({4, 4}, d, 3), Pool2dParams{}), ValueError);
  CHECK_THROWS_WITH(batch_norm(random_input({1, 2}, d, 4), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("more than one value per channel"));
}

}  // namespace
}  // namespace streamgrad

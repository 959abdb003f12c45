// group_norm (ops/group_norm.cc): values and gradients (first and second order) against
// the composite formula written with reshape / mean / var, known values, float32 against
// float64, float16 / bfloat16 against float32 (mixed precision and autocast), empty
// batches, and the errors for bad arguments.
#include <cmath>
#include <string>
#include <vector>

#include "engine/autocast.h"
#include "engine/backward.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

// The reference's definition, step by step: [N, G, rest] statistics, biased variance.
Tensor composite_group_norm(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b,
                            double eps) {
  const Tensor g = reshape(x, {x.size(0), groups, -1});
  const Tensor centred = sub(g, mean(g, {2}, /*keepdim=*/true));
  const Tensor var = streamgrad::var(g, {2}, /*correction=*/0, /*keepdim=*/true);
  Tensor y = reshape(div(centred, sqrt(add(var, eps))), x.sizes());
  Shape per_channel(x.dim(), 1);
  per_channel[1] = x.size(1);
  if (w.defined()) y = mul(y, reshape(w, per_channel));
  if (b.defined()) y = add(y, reshape(b, per_channel));
  return y;
}

TEST_CASE("group_norm equals its composite formula", "[ops][norm]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 6, 3, 2}, d, 1, -2, 3);
  const Tensor w = random_input({6}, d, 2, 0.5, 2), b = random_input({6}, d, 3);
  for (int64_t groups : {1, 2, 3, 6}) {
    INFO(groups << " groups on " << d);
    check_same(group_norm(x, groups, w, b), composite_group_norm(x, groups, w, b, 1e-5));
    check_same(group_norm(x, groups), composite_group_norm(x, groups, {}, {}, 1e-5));
  }
  check_same(group_norm(x, 3, w, Tensor(), 0.5), composite_group_norm(x, 3, w, {}, 0.5));
  check_same(group_norm(x, 2, Tensor(), b), composite_group_norm(x, 2, {}, b, 1e-5));
  // [N, C] and [N, C, L] inputs, and a non-contiguous one (normalised as its values are).
  const Tensor x2 = random_input({3, 4}, d, 4), x3 = random_input({2, 4, 5}, d, 5);
  const Tensor w4 = random_input({4}, d, 6, 0.5, 2);
  check_same(group_norm(x2, 2, w4), composite_group_norm(x2, 2, w4, {}, 1e-5));
  check_same(group_norm(x3, 4, w4), composite_group_norm(x3, 4, w4, {}, 1e-5));
  const Tensor xt = transpose(random_input({2, 5, 4}, d, 7), 1, 2);  // [2, 4, 5]
  REQUIRE(!xt.is_contiguous());
  check_same(group_norm(xt, 2, w4), composite_group_norm(contiguous(xt), 2, w4, {}, 1e-5));
}

TEST_CASE("group_norm normalises each sample's groups on their own", "[ops][norm]") {
  const Device d = test_device();
  // One sample, two groups of one channel of 2 values: (a - m) / sqrt(v + eps) is -1, 1
  // up to eps for both; the weight and bias then act per channel.
  const Tensor x = input({1, 3, 10, 30}, {1, 2, 2}, d, false);
  const Tensor w = input({2, -1}, {2}, d, false), b = input({0.5, 0}, {2}, d, false);
  const double s1 = 1 / std::sqrt(1 + 1e-5), s10 = 10 / std::sqrt(100 + 1e-5);
  check_values(group_norm(x, 2, w, b), {-2 * s1 + 0.5, 2 * s1 + 0.5, s10, -s10}, 1e-12);
  // One group over both channels: mean 11, biased variance 131.5.
  const double sd = std::sqrt(131.5 + 1e-5);
  check_values(group_norm(x, 1), {-10 / sd, -8 / sd, -1 / sd, 19 / sd}, 1e-12);
}

TEST_CASE("group_norm gradients equal the composite's, to second order", "[ops][norm][grad]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 4, 3}, d, 11, -2, 3);
  const Tensor w = random_input({4}, d, 12, 0.5, 2), b = random_input({4}, d, 13);
  const TensorList in = {x, w, b};
  const Fn fused = [](const TensorList& t) { return group_norm(t[0], 2, t[1], t[2], 1e-3); };
  const Fn composite = [](const TensorList& t) {
    return composite_group_norm(t[0], 2, t[1], t[2], 1e-3);
  };
  const Tensor y = fused(in), yc = composite(in);
  const Tensor seed = weight_for(y, 5);
  const TensorList g = grad({y}, in, {seed});
  const TensorList gc = grad({yc}, in, {seed});
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("gradient " << i << " on " << d);
    check_same(g[i], gc[i], 1e-10);
  }
  const TensorList v = {weight_for(x, 14), weight_for(w, 15), weight_for(b, 16)};
  const Tensor s = gradient_projection(fused, in, seed, v);
  const Tensor sc = gradient_projection(composite, in, seed, v);
  check_same(s, sc, 1e-10);
  const TensorList gg = grad({s}, in, {}, false, false, /*allow_unused=*/true);
  const TensorList ggc = grad({sc}, in, {}, false, false, true);
  for (size_t i = 0; i < gg.size(); ++i) {
    INFO("second-order gradient " << i << " on " << d);
    REQUIRE(gg[i].defined() == ggc[i].defined());
    if (gg[i].defined()) check_same(gg[i], ggc[i], 1e-9);
  }
}

TEST_CASE("group_norm passes central differences", "[ops][norm][grad]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 4, 2}, d, 21, -2, 3), w = random_input({4}, d, 22, 0.5, 2);
  const Tensor b = random_input({4}, d, 23);
  const Fn f = [](const TensorList& t) { return group_norm(t[0], 2, t[1], t[2]); };
  check_gradients(f, {x, w, b});
  check_second_order(f, {x, w, b});
}

TEST_CASE("group_norm in float32 agrees with float64", "[ops][norm]") {
  const Device d = test_device();
  const Tensor x = random_input({3, 6, 4}, d, 31, -3, 5), w = random_input({6}, d, 32, 0.5, 2);
  const Tensor b = random_input({6}, d, 33);
  const Tensor y64 = group_norm(x, 3, w, b);
  const Tensor y32 = group_norm(to(x, DType::kFloat32), 3, to(w, DType::kFloat32),
                                to(b, DType::kFloat32));
  CHECK(y32.dtype() == DType::kFloat32);
  check_values(to(y32, DType::kFloat64), values(y64), 1e-5);
}

TEST_CASE("group_norm with a 16-bit input: float32 arithmetic rounded once, and autocast",
          "[ops][norm][amp]") {
  const Device d = test_device();
  const TensorOptions f32 = TensorOptions().device(d);
  const Tensor xf = add(mul(randn({2, 4, 6}, f32), 2.0), 1.0);
  const Tensor w = add(rand({4}, f32), 0.5).requires_grad_(true);
  const Tensor b = randn({4}, f32).requires_grad_(true);
  for (const DType dt : {DType::kBFloat16, DType::kFloat16}) {
    INFO(dtype_name(dt) << " on " << d);
    const Tensor x = to(xf, dt).detach().requires_grad_(true);
    const Tensor want = group_norm(to(x.detach(), DType::kFloat32), 2, w.detach(), b.detach());
    // float32 parameters beside the 16-bit input, and 16-bit ones.
    for (const bool half_params : {false, true}) {
      const Tensor wp = half_params ? to(w, dt) : w, bp = half_params ? to(b, dt) : b;
      const Tensor y = group_norm(x, 2, wp, bp);
      CHECK(y.dtype() == dt);
      const Tensor want_p = half_params ? group_norm(to(x.detach(), DType::kFloat32), 2,
                                                     to(wp.detach(), DType::kFloat32),
                                                     to(bp.detach(), DType::kFloat32))
                                        : want;
      CHECK(to(y, DType::kFloat32).to_vector<float>() ==
            to(to(want_p, dt), DType::kFloat32).to_vector<float>());
      const TensorList g = grad({y}, {x, wp, bp}, {ones_like(y)});
      CHECK(g[0].dtype() == dt);
      CHECK(g[1].dtype() == wp.dtype());
      CHECK(g[2].dtype() == bp.dtype());
    }
    AutocastGuard amp(d.type(), dt);
    CHECK(group_norm(x, 2, w, b).dtype() == DType::kFloat32);
    CHECK(group_norm(xf, 4).dtype() == DType::kFloat32);
  }
}

TEST_CASE("group_norm of an empty batch gives an empty result and zero parameter gradients",
          "[ops][norm]") {
  const Device d = test_device();
  const Tensor x = zeros({0, 4, 3}, f64(d)).requires_grad_(true);
  const Tensor w = random_input({4}, d, 41), b = random_input({4}, d, 42);
  const Tensor y = group_norm(x, 2, w, b);
  CHECK(y.sizes() == Shape{0, 4, 3});
  const TensorList g = grad({y}, {x, w, b}, {zeros({0, 4, 3}, f64(d))});
  CHECK(g[0].sizes() == Shape{0, 4, 3});
  CHECK(values(g[1]) == std::vector<double>(4, 0.0));
  CHECK(values(g[2]) == std::vector<double>(4, 0.0));
}

TEST_CASE("group_norm refuses bad arguments, naming them", "[ops][norm][errors]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 6, 4}, d, 51);
  const Tensor w6 = random_input({6}, d, 52);
  expect_error<ValueError>([&] { group_norm(x, 4); },
                           {"group_norm: the number of channels 6", "float64[2, 6, 4]",
                            "divisible by num_groups 4"});
  expect_error<ValueError>([&] { group_norm(x, 0); }, {"group_norm: num_groups", "got 0"});
  expect_error<ValueError>([&] { group_norm(random_input({6}, d, 53), 2); },
                           {"group_norm: expected an [N, C]", "float64[6]"});
  expect_error<ValueError>([&] { group_norm(x, 2, random_input({4}, d, 54)); },
                           {"group_norm: weight float64[4]", "[6]", "float64[2, 6, 4]"});
  expect_error<ValueError>([&] { group_norm(x, 2, w6, random_input({2, 3}, d, 55)); },
                           {"group_norm: bias float64[2, 3]", "[6]"});
  expect_error<ValueError>([&] { group_norm(x, 2, to(w6, DType::kFloat32)); },
                           {"group_norm: weight float32[6]", "must be float64 like input"});
  const Tensor ints = zeros({2, 2}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>([&] { group_norm(ints, 1); }, {"group_norm", "int64"});
  const Device other = d.type() == DeviceType::kCpu ? Device("sim:0") : Device("cpu");
  expect_error<DeviceError>([&] { group_norm(x, 2, to(w6, other)); }, {"group_norm"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

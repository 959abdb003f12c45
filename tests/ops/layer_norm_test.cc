// layer_norm and rms_norm (ops/layer_norm.cc): values and gradients (first and second
// order) against the composite formula written with mean / sub / mul / rsqrt, one fused
// kernel each way, rms_norm's default eps, mixed precision and autocast, empty inputs,
// and the errors for bad arguments.
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "engine/autocast.h"
#include "engine/backward.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

// The trailing `k` dims of x, negative-indexed, for the composite formulas.
std::vector<int64_t> last_dims(int64_t k) {
  std::vector<int64_t> dims;
  for (int64_t d = -k; d < 0; ++d) dims.push_back(d);
  return dims;
}

Tensor composite_layer_norm(const Tensor& x, int64_t k, const Tensor& w, const Tensor& b,
                            double eps) {
  const std::vector<int64_t> dims = last_dims(k);
  const Tensor centred = sub(x, mean(x, dims, /*keepdim=*/true));
  const Tensor var = mean(mul(centred, centred), dims, true);
  Tensor y = div(centred, sqrt(add(var, eps)));
  if (w.defined()) y = mul(y, w);
  if (b.defined()) y = add(y, b);
  return y;
}

Tensor composite_rms_norm(const Tensor& x, int64_t k, const Tensor& w, double eps) {
  Tensor y = mul(x, rsqrt(add(mean(mul(x, x), last_dims(k), true), eps)));
  return w.defined() ? mul(y, w) : y;
}

TEST_CASE("layer_norm and rms_norm equal their composite formulas", "[ops][norm]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3, 4, 5}, d, 1, -2, 3);
  const Tensor w1 = random_input({5}, d, 2, 0.5, 2), b1 = random_input({5}, d, 3);
  const Tensor w2 = random_input({4, 5}, d, 4, 0.5, 2), b2 = random_input({4, 5}, d, 5);
  check_same(layer_norm(x, {5}, w1, b1), composite_layer_norm(x, 1, w1, b1, 1e-5));
  check_same(layer_norm(x, {4, 5}, w2, b2, 0.1), composite_layer_norm(x, 2, w2, b2, 0.1));
  check_same(layer_norm(x, {3, 4, 5}), composite_layer_norm(x, 3, Tensor(), Tensor(), 1e-5));
  check_same(layer_norm(x, {5}, Tensor(), b1), composite_layer_norm(x, 1, Tensor(), b1, 1e-5));
  check_same(rms_norm(x, {5}, w1, 1e-5), composite_rms_norm(x, 1, w1, 1e-5));
  check_same(rms_norm(x, {4, 5}, Tensor(), 0.5), composite_rms_norm(x, 2, Tensor(), 0.5));
  // A non-contiguous input is normalised as its values are.
  const Tensor xt = transpose(x, 2, 3);
  const Tensor w4 = random_input({4}, d, 6, 0.5, 2);
  check_same(layer_norm(xt, {4}, w4), composite_layer_norm(xt, 1, w4, Tensor(), 1e-5));
  check_same(rms_norm(xt, {5, 4}), composite_rms_norm(xt, 2, Tensor(), DBL_EPSILON));
  CHECK(layer_norm(x, {5}).sizes() == x.sizes());
}

TEST_CASE("layer_norm and rms_norm gradients equal the composite's, to second order",
          "[ops][norm][grad]") {
  const Device d = test_device();
  const Tensor x = random_input({3, 2, 4}, d, 7, -2, 3);
  const Tensor w = random_input({2, 4}, d, 8, 0.5, 2), b = random_input({2, 4}, d, 9);
  struct Case {
    const char* name;
    Fn fused, composite;
  };
  const std::vector<Case> cases = {
      {"layer_norm", [](const TensorList& t) { return layer_norm(t[0], {2, 4}, t[1], t[2]); },
       [](const TensorList& t) { return composite_layer_norm(t[0], 2, t[1], t[2], 1e-5); }},
      {"rms_norm", [](const TensorList& t) { return rms_norm(t[0], {2, 4}, t[1], 1e-3); },
       [](const TensorList& t) { return composite_rms_norm(t[0], 2, t[1], 1e-3); }},
  };
  for (const Case& c : cases) {
    INFO(c.name << " on " << d);
    const TensorList in = {x, w, b};
    const Tensor y = c.fused(in), yc = c.composite(in);
    const Tensor seed = weight_for(y, 5);
    const TensorList g = grad({y}, in, {seed}, false, false, /*allow_unused=*/true);
    const TensorList gc = grad({yc}, in, {seed}, false, false, true);
    for (size_t i = 0; i < g.size(); ++i) {
      INFO("gradient " << i);
      REQUIRE(g[i].defined() == gc[i].defined());
      if (g[i].defined()) check_same(g[i], gc[i], 1e-10);
    }
    // Second order: gradients of a projection of the first ones (create_graph).
    const TensorList v = {weight_for(x, 11), weight_for(w, 12), weight_for(b, 13)};
    const Tensor s = gradient_projection(c.fused, in, seed, v);
    const Tensor sc = gradient_projection(c.composite, in, seed, v);
    check_same(s, sc, 1e-10);
    const TensorList gg = grad({s}, in, {}, false, false, true);
    const TensorList ggc = grad({sc}, in, {}, false, false, true);
    for (size_t i = 0; i < gg.size(); ++i) {
      INFO("second-order gradient " << i);
      REQUIRE(gg[i].defined() == ggc[i].defined());
      if (gg[i].defined()) check_same(gg[i], ggc[i], 1e-9);
    }
  }
}

TEST_CASE("layer_norm and rms_norm pass central differences", "[ops][norm][grad]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 5}, d, 21, -2, 3), w = random_input({5}, d, 22, 0.5, 2);
  const Tensor b = random_input({5}, d, 23);
  check_gradients([](const TensorList& t) { return layer_norm(t[0], {5}, t[1], t[2]); },
                  {x, w, b});
  check_second_order([](const TensorList& t) { return layer_norm(t[0], {5}, t[1], t[2]); },
                     {x, w, b});
  check_gradients([](const TensorList& t) { return rms_norm(t[0], {5}, t[1]); }, {x, w});
  check_second_order([](const TensorList& t) { return rms_norm(t[0], {5}, t[1]); }, {x, w});
}

TEST_CASE("layer_norm runs one fused kernel each way", "[ops][norm]") {
  const Device d = test_device();
  const Tensor x = random_input({4, 6}, d, 31), w = random_input({6}, d, 32);
  const Tensor b = random_input({6}, d, 33);
  KernelNames seen;
  const Tensor y = layer_norm(x, {6}, w, b);
  CHECK(seen.names == std::vector<std::string>{"layer_norm"});
  CHECK(y.grad_fn()->name() == "LayerNormBackward");
  seen.names.clear();
  grad({y}, {x, w, b}, {ones_like(y)});
  CHECK(seen.names == std::vector<std::string>{"fill", "layer_norm_backward"});
  seen.names.clear();
  const Tensor r = rms_norm(x, {6}, w);
  CHECK(r.grad_fn()->name() == "RmsNormBackward");
  grad({r}, {x, w}, {ones_like(r)});
  CHECK(seen.names == std::vector<std::string>{"rms_norm", "fill", "rms_norm_backward"});
}

TEST_CASE("rms_norm's default eps is the machine epsilon it computes in", "[ops][norm]") {
  const Device d = test_device();
  // A row of 1e-4: its mean square 1e-8 is below float32's epsilon (1.19e-7), so the
  // epsilon shows in the result.
  for (const DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
    INFO(dtype_name(dt) << " on " << d);
    const Tensor x = full({2, 3}, 1e-4, TensorOptions().dtype(dt).device(d));
    const double v = to(x, DType::kFloat64).to_vector<double>()[0];
    const double e = dt == DType::kFloat64 ? DBL_EPSILON : FLT_EPSILON;
    const double want = v / std::sqrt(v * v + e);
    const double tol = dt == DType::kFloat16 ? 1e-3 : dt == DType::kFloat32 ? 1e-6 : 1e-14;
    for (double got : to(rms_norm(x, {3}), DType::kFloat64).to_vector<double>()) {
      CHECK(std::abs(got - want) <= tol * want);
    }
  }
}

TEST_CASE("layer_norm with a 16-bit input and float32 parameters, and under autocast",
          "[ops][norm][amp]") {
  const Device d = test_device();
  const TensorOptions f32 = TensorOptions().device(d);
  const Tensor xf = add(mul(randn({4, 8}, f32), 2.0), 1.0);
  const Tensor x = to(xf, DType::kBFloat16).detach().requires_grad_(true);
  const Tensor w = add(rand({8}, f32), 0.5).requires_grad_(true);
  const Tensor b = randn({8}, f32).requires_grad_(true);
  const Tensor y = layer_norm(x, {8}, w, b);
  CHECK(y.dtype() == DType::kBFloat16);
  const TensorList g = grad({y}, {x, w, b}, {ones_like(y)});
  CHECK(g[0].dtype() == DType::kBFloat16);
  CHECK(g[1].dtype() == DType::kFloat32);
  CHECK(g[2].dtype() == DType::kFloat32);
  // The float32 result rounded once.
  const Tensor want = layer_norm(to(x.detach(), DType::kFloat32), {8}, w.detach(), b.detach());
  CHECK(to(y, DType::kFloat32).to_vector<float>() ==
        to(to(want, DType::kBFloat16), DType::kFloat32).to_vector<float>());
  // Autocast runs both in float32 (the reference's fp32 list), whatever the input's dtype.
  AutocastGuard amp(d.type(), DType::kBFloat16);
  CHECK(layer_norm(x, {8}, w, b).dtype() == DType::kFloat32);
  CHECK(rms_norm(x, {8}, to(w, DType::kBFloat16)).dtype() == DType::kFloat32);
  CHECK(layer_norm(xf, {8}).dtype() == DType::kFloat32);
}

TEST_CASE("layer_norm of no rows gives an empty result and zero parameter gradients",
          "[ops][norm]") {
  const Device d = test_device();
  const Tensor x = zeros({0, 3}, f64(d)).requires_grad_(true);
  const Tensor w = random_input({3}, d, 41), b = random_input({3}, d, 42);
  const Tensor y = layer_norm(x, {3}, w, b);
  CHECK(y.sizes() == Shape{0, 3});
  const TensorList g = grad({y}, {x, w, b}, {zeros({0, 3}, f64(d))});
  CHECK(g[0].sizes() == Shape{0, 3});
  CHECK(values(g[1]) == std::vector<double>(3, 0.0));
  CHECK(values(g[2]) == std::vector<double>(3, 0.0));
}

TEST_CASE("layer_norm and rms_norm refuse bad arguments, naming them", "[ops][norm][errors]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3, 4}, d, 51);
  const Tensor w4 = random_input({4}, d, 52);
  expect_error<ValueError>([&] { layer_norm(x, {3}); },
                           {"layer_norm: normalized_shape [3] must equal the input's last 1 dim",
                            "[*, 3]", "float64[2, 3, 4]"});
  expect_error<ValueError>([&] { rms_norm(x, {2, 3, 4, 5}); },
                           {"rms_norm: normalized_shape [2, 3, 4, 5]", "[*, 2, 3, 4, 5]"});
  expect_error<ValueError>([&] { layer_norm(x, {}); }, {"layer_norm: normalized_shape must name"});
  expect_error<ValueError>([&] { layer_norm(x, {3, 4}, w4); },
                           {"layer_norm: weight float64[4]", "normalized_shape [3, 4]"});
  expect_error<ValueError>([&] { layer_norm(x, {4}, w4, random_input({3}, d, 53)); },
                           {"layer_norm: bias float64[3]", "normalized_shape [4]"});
  expect_error<ValueError>([&] { rms_norm(x, {4}, to(w4, DType::kFloat32)); },
                           {"rms_norm: weight float32[4]", "must be float64 like input"});
  const Tensor ints = zeros({2}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>([&] { layer_norm(ints, {2}); }, {"layer_norm", "int64"});
  const Device other = d.type() == DeviceType::kCpu ? Device("sim:0") : Device("cpu");
  expect_error<DeviceError>([&] { layer_norm(x, {4}, to(w4, other)); }, {"layer_norm"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad

// AutocastGuard (engine/autocast.h) and the op policy (ops/autocast_policy.h), the
// behaviours of the reference framework's autocast tests: the dtype each class of op
// produces, device-type scoping, nesting and disabling, the per-scope cast cache, and a
// backward that runs in the forward's dtypes without autocasting.
#include <catch2/catch.hpp>
#include <string>

#include "engine/autocast.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TensorOptions on(const Device& d) { return TensorOptions().device(d); }

Tensor param(const Shape& s, const Device& d) {
  Tensor t = randn(s, on(d));
  t.requires_grad_(true);
  return t;
}

TEST_CASE("autocast: each class of op gets its dtype", "[amp]") {
  const Device d(GENERATE(std::string("cpu"), std::string("sim:0")));
  const DType low = GENERATE(DType::kBFloat16, DType::kFloat16);
  const Tensor x = randn({4, 3}, on(d));
  const Tensor w = param({5, 3}, d);
  const Tensor img = randn({2, 3, 6, 6}, on(d));
  const Tensor k = param({4, 3, 3, 3}, d);
  AutocastGuard amp(d.type(), low);
  REQUIRE(is_autocast_enabled(d.type()));
  // Lower precision.
  CHECK(linear(x, w).dtype() == low);
  CHECK(matmul(x, transpose(w, 0, 1)).dtype() == low);
  CHECK(conv2d(img, k).dtype() == low);
  // Float32, also from lower-precision inputs.
  const Tensor h = linear(x, w);
  CHECK(softmax(h, 1).dtype() == DType::kFloat32);
  CHECK(log_softmax(h, 1).dtype() == DType::kFloat32);
  CHECK(sum(h).dtype() == DType::kFloat32);
  CHECK(mean(h, {1}).dtype() == DType::kFloat32);
  CHECK(exp(h).dtype() == DType::kFloat32);
  CHECK(log(abs(h)).dtype() == DType::kFloat32);
  CHECK(pow(h, 2.0).dtype() == DType::kFloat32);
  const Tensor target = from_vector<int64_t>({0, 1, 4, 2}, {4}, TensorOptions().dtype(DType::kInt64).device(d));
  CHECK(cross_entropy(h, target).dtype() == DType::kFloat32);
  CHECK(mse_loss(h, zeros({4, 5}, on(d))).dtype() == DType::kFloat32);
  // Promote: the widest input.
  CHECK(add(h, zeros({4, 5}, on(d))).dtype() == DType::kFloat32);
  CHECK(cat({h, zeros({1, 5}, on(d))}, 0).dtype() == DType::kFloat32);
  CHECK(stack({h, h}, 0).dtype() == low);
  CHECK(where(gt(h, 0.0), h, zeros({4, 5}, on(d))).dtype() == DType::kFloat32);
  // Everything else keeps its input's dtype; batch_norm keeps float32 parameters and
  // running statistics beside a 16-bit input, and updates the statistics in float32.
  const Tensor rm = zeros({5}, on(d)), rv = ones({5}, on(d));
  const Tensor bn = batch_norm(h, ones({5}, on(d)), zeros({5}, on(d)), rm, rv, true);
  CHECK(bn.dtype() == low);
  CHECK(rm.dtype() == DType::kFloat32);
  CHECK(sum(abs(rm)).item<float>() > 0);
  CHECK(batch_norm(h, Tensor(), Tensor(), rm, rv, /*training=*/false).dtype() == low);
  CHECK(relu(h).dtype() == low);
  CHECK(relu(x).dtype() == DType::kFloat32);
  CHECK(transpose(h, 0, 1).dtype() == low);
  // Non-floating tensors are never cast.
  CHECK(gather(x, 1, zeros({4, 1}, TensorOptions().dtype(DType::kInt64).device(d))).dtype() ==
        DType::kFloat32);
}

TEST_CASE("autocast: values are the float32 op's, rounded", "[amp]") {
  const Device d(GENERATE(std::string("cpu"), std::string("sim:0")));
  const Tensor x = randn({8, 16}, on(d));
  const Tensor w = randn({4, 16}, on(d));
  Tensor y;
  {
    AutocastGuard amp(d.type(), DType::kBFloat16);
    y = linear(x, w);
  }
  // The same as converting the inputs by hand and running in float32, then rounding once.
  const Tensor ref = to(linear(to(to(x, DType::kBFloat16), DType::kFloat32),
                               to(to(w, DType::kBFloat16), DType::kFloat32)),
                        DType::kBFloat16);
  CHECK(to(y, DType::kFloat32).to_vector<float>() == to(ref, DType::kFloat32).to_vector<float>());
}

TEST_CASE("autocast: a guard on one device type leaves the others alone", "[amp]") {
  const Tensor xc = randn({2, 3});
  const Tensor wc = randn({4, 3});
  const Tensor xs = randn({2, 3}, on(Device("sim:0")));
  const Tensor ws = randn({4, 3}, on(Device("sim:0")));
  {
    AutocastGuard amp(DeviceType::kSim);
    CHECK(is_autocast_enabled(DeviceType::kSim));
    CHECK_FALSE(is_autocast_enabled(DeviceType::kCpu));
    CHECK(linear(xs, ws).dtype() == DType::kFloat16);  // sim's default
    CHECK(linear(xc, wc).dtype() == DType::kFloat32);
  }
  {
    AutocastGuard amp(DeviceType::kCpu);
    CHECK(autocast_dtype(DeviceType::kCpu) == DType::kBFloat16);  // cpu's default
    CHECK(linear(xc, wc).dtype() == DType::kBFloat16);
    CHECK(linear(xs, ws).dtype() == DType::kFloat32);
  }
  CHECK_FALSE(is_autocast_enabled(DeviceType::kCpu));
  CHECK(linear(xc, wc).dtype() == DType::kFloat32);
}

TEST_CASE("autocast: nested guards replace the state and restore it", "[amp]") {
  const Tensor x = randn({2, 3}, on(Device("sim:0")));
  const Tensor w = randn({4, 3}, on(Device("sim:0")));
  AutocastGuard outer(DeviceType::kSim, DType::kFloat16);
  CHECK(linear(x, w).dtype() == DType::kFloat16);
  {
    AutocastGuard inner(DeviceType::kSim, DType::kBFloat16);
    CHECK(linear(x, w).dtype() == DType::kBFloat16);
    {
      AutocastGuard off(DeviceType::kSim, std::nullopt, /*enabled=*/false);
      CHECK_FALSE(is_autocast_enabled(DeviceType::kSim));
      CHECK(linear(x, w).dtype() == DType::kFloat32);
      // An op on lower-precision inputs inside a disabled region runs in their dtype.
      CHECK(softmax(to(x, DType::kFloat16), 1).dtype() == DType::kFloat16);
    }
    CHECK(linear(x, w).dtype() == DType::kBFloat16);
  }
  CHECK(autocast_dtype(DeviceType::kSim) == DType::kFloat16);
  CHECK(linear(x, w).dtype() == DType::kFloat16);
}

TEST_CASE("autocast: a dtype that is not lower precision is refused", "[amp]") {
  CHECK_THROWS_AS(AutocastGuard(DeviceType::kCpu, DType::kFloat64), ValueError);
  CHECK_THROWS_WITH(AutocastGuard(DeviceType::kCpu, DType::kInt64),
                    Catch::Contains("DType::kFloat16 or DType::kBFloat16"));
  CHECK_FALSE(is_autocast_enabled(DeviceType::kCpu));
}

TEST_CASE("autocast: a weight is cast once per scope, and the cache is scoped", "[amp]") {
  const Device d(GENERATE(std::string("cpu"), std::string("sim:0")));
  const Tensor w = param({4, 3}, d);
  const Tensor x = randn({2, 3}, on(d));
  {
    AutocastGuard amp(d.type(), DType::kFloat16);
    const Tensor a = linear(x, w);
    const Tensor b = linear(x, w);
    // One cached cast of w, used by both: the same node feeds both products.
    CHECK(autocast_internal::cache_size() == 1);
    CHECK(a.grad_fn()->next_edge(1).function == b.grad_fn()->next_edge(1).function);
    // Not cached: non-leaves, tensors that do not require grad, casts to float32, and
    // anything under no_grad.
    linear(mul(x, 2.0), add(w, 0.0));
    matmul(x, transpose(x, 0, 1));
    sum(a);
    {
      NoGradGuard no_grad;
      const Tensor w2 = param({4, 3}, d);
      linear(x, w2);
    }
    CHECK(autocast_internal::cache_size() == 1);
    {
      AutocastGuard inner(d.type(), DType::kFloat16);
      linear(x, w);
      CHECK(autocast_internal::cache_size() == 1);  // the outer scope's entry, reused
    }
    CHECK(autocast_internal::cache_size() == 1);  // only the outermost guard clears it
    // Gradients through the shared cast add up in w.grad, in float32.
    backward({sum(a), sum(b)});
    REQUIRE(w.grad().defined());
    CHECK(w.grad().dtype() == DType::kFloat32);
  }
  CHECK(autocast_internal::cache_size() == 0);
}

TEST_CASE("autocast: backward runs in the forward's dtypes, without autocasting", "[amp]") {
  const Device d(GENERATE(std::string("cpu"), std::string("sim:0")));
  const Tensor x = param({3, 4}, d);
  const Tensor w = param({5, 4}, d);
  DType seen_at_h = DType::kBool;
  DType product_in_hook = DType::kBool;
  AutocastGuard amp(d.type(), DType::kBFloat16);
  const Tensor h = linear(x, w);  // bfloat16
  h.register_hook([&](const Tensor& g) {
    seen_at_h = g.dtype();
    // An op inside backward (here a hook, on the thread that runs the node) is not
    // autocast: float32 in, float32 out.
    product_in_hook = matmul(to(g, DType::kFloat32), ones({5, 1}, on(g.device()))).dtype();
    return Tensor();
  });
  const Tensor loss = sum(exp(h));  // exp and sum in float32
  loss.backward();  // inside the guard, as a careless user might
  synchronize(d);
  CHECK(loss.dtype() == DType::kFloat32);
  CHECK(seen_at_h == DType::kBFloat16);
  CHECK(product_in_hook == DType::kFloat32);
  REQUIRE(x.grad().defined());
  REQUIRE(w.grad().defined());
  CHECK(x.grad().dtype() == DType::kFloat32);
  CHECK(w.grad().dtype() == DType::kFloat32);
  // The gradient agrees with a float32 computation within bfloat16's precision.
  const Tensor xf = x.detach().requires_grad_(true);
  Tensor ref;
  {
    AutocastGuard off(d.type(), std::nullopt, /*enabled=*/false);
    ref = grad({sum(exp(linear(xf, w.detach())))}, {xf})[0];
  }
  const std::vector<float> got = x.grad().to_vector<float>(), want = ref.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(got[i] - want[i]) <= 0.05f * (1 + std::abs(want[i])));
  }
}

TEST_CASE("type promotion: mixed floating operands of element-wise ops", "[amp]") {
  const Tensor a = param({3}, Device("cpu"));
  const Tensor h = to(randn({3}), DType::kFloat16);
  const Tensor b = to(randn({3}), DType::kBFloat16);
  CHECK(add(a, h).dtype() == DType::kFloat32);
  CHECK(mul(h, b).dtype() == DType::kFloat32);  // float16 with bfloat16 meet in float32
  CHECK(div(h, to(a, DType::kFloat64)).dtype() == DType::kFloat64);
  CHECK(lt(h, a).dtype() == DType::kBool);
  // A 0-dim operand takes the dimensioned one's dtype.
  CHECK(add(h, scalar_tensor(2.0, TensorOptions().dtype(DType::kFloat64))).dtype() ==
        DType::kFloat16);
  // Gradients return in each input's dtype.
  const Tensor hh = to(randn({3}), DType::kFloat16).requires_grad_(true);
  sum(mul(a, hh)).backward();
  CHECK(a.grad().dtype() == DType::kFloat32);
  CHECK(hh.grad().dtype() == DType::kFloat16);
}

}  // namespace
}  // namespace streamgrad

// Optimisers and schedulers against update rules computed here in double precision
// (PyTorch's documented algorithms for SGD, Adam and AdamW; test/test_optim.py checks
// the same rules), on cpu and sim:0; state dicts resume exactly; a small MLP learns.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

// loss = sum(c * p^2) / 2 over p = {1.5, -2}, c = {1, 3}: the gradient is c * p.
const std::vector<double> kStart{1.5, -2.0}, kCurve{1.0, 3.0};

Tensor quadratic_loss(const Tensor& p) {
  const Tensor c = from_vector<double>(kCurve, {2}, TensorOptions().dtype(DType::kFloat64).device(p.device()));
  return mul(sum(mul(c, mul(p, p))), 0.5);
}

Tensor start_param(Device d) {
  return from_vector<double>(kStart, {2}, TensorOptions().dtype(DType::kFloat64).device(d)).requires_grad_();
}

std::vector<double> run(nn::Optimizer& opt, const Tensor& p, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    quadratic_loss(p).backward();
    opt.step();
  }
  return p.to_vector<double>();
}

TEST_CASE("SGD follows PyTorch's rule: weight decay, momentum, dampening, nesterov", "[nn][optim]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const bool nesterov = GENERATE(false, true);
  const double lr = 0.1, mom = 0.8, wd = 0.05, damp = nesterov ? 0 : 0.3;
  Tensor p = start_param(d);
  nn::SGD opt({p}, nn::SGDOptions(lr).momentum(mom).dampening(damp).weight_decay(wd).nesterov(nesterov));
  std::vector<double> want = kStart, buf(2);
  for (int step = 0; step < 4; ++step) {
    for (int i = 0; i < 2; ++i) {
      double g = kCurve[i] * want[i] + wd * want[i];
      buf[i] = step == 0 ? g : mom * buf[i] + (1 - damp) * g;
      g = nesterov ? g + mom * buf[i] : buf[i];
      want[i] -= lr * g;
    }
  }
  const std::vector<double> got = run(opt, p, 4);
  CHECK(got[0] == Approx(want[0]).epsilon(1e-12));
  CHECK(got[1] == Approx(want[1]).epsilon(1e-12));
}

TEST_CASE("Adam and AdamW follow PyTorch's rule with bias correction", "[nn][optim]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const bool decoupled = GENERATE(false, true);
  const double lr = 0.05, b1 = 0.8, b2 = 0.9, eps = 1e-6, wd = 0.1;
  Tensor p = start_param(d);
  const nn::AdamOptions o = nn::AdamOptions(lr).beta1(b1).beta2(b2).eps(eps).weight_decay(wd);
  std::unique_ptr<nn::Optimizer> opt;
  if (decoupled) {
    opt = std::make_unique<nn::AdamW>(std::vector<Tensor>{p}, o);
  } else {
    opt = std::make_unique<nn::Adam>(std::vector<Tensor>{p}, o);
  }
  std::vector<double> want = kStart, m(2), v(2);
  for (int t = 1; t <= 5; ++t) {
    for (int i = 0; i < 2; ++i) {
      double g = kCurve[i] * want[i];
      if (decoupled) {
        want[i] *= 1 - lr * wd;
      } else {
        g += wd * want[i];
      }
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
      want[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
  const std::vector<double> got = run(*opt, p, 5);
  // Adam's denominator is sqrt(v) / sqrt(bias2) + eps, PyTorch's ordering; the reference
  // divides v first, so the two differ by rounding only.
  CHECK(got[0] == Approx(want[0]).epsilon(1e-9));
  CHECK(got[1] == Approx(want[1]).epsilon(1e-9));
}

TEST_CASE("an optimiser's state dict resumes training exactly", "[nn][optim]") {
  Tensor a = start_param(Device("cpu")), b = start_param(Device("cpu"));
  nn::Adam first({a}, nn::AdamOptions(0.1));
  run(first, a, 3);
  nn::Adam second({b}, nn::AdamOptions(0.1));
  {
    NoGradGuard no_grad;
    copy_(b, a);
  }
  second.load_state_dict(first.state_dict());
  CHECK(run(first, a, 2) == run(second, b, 2));
  nn::OptimizerState bad = first.state_dict();
  bad.tensors[0].first = "7.exp_avg";
  CHECK_THROWS_WITH(second.load_state_dict(bad), Catch::Contains("names no parameter"));
}

TEST_CASE("parameters without a gradient are skipped", "[nn][optim]") {
  Tensor used = start_param(Device("cpu")), unused = start_param(Device("cpu"));
  nn::SGD opt({used, unused}, nn::SGDOptions(0.5).momentum(0.9));
  run(opt, used, 2);
  CHECK(unused.to_vector<double>() == kStart);
  CHECK(opt.state_dict().tensors.size() == 1);
}

TEST_CASE("schedulers: StepLR and CosineAnnealingLR closed forms", "[nn][optim]") {
  Tensor p = start_param(Device("cpu"));
  nn::SGD opt({p}, nn::SGDOptions(0.8));
  nn::StepLR step(opt, 2, 0.5);
  std::vector<double> lrs;
  for (int e = 0; e < 5; ++e) {
    step.step();
    lrs.push_back(step.get_last_lr());
  }
  CHECK(lrs == std::vector<double>{0.8, 0.4, 0.4, 0.2, 0.2});
  nn::SGD opt2({p}, nn::SGDOptions(1.0));
  nn::CosineAnnealingLR cos(opt2, 4, 0.2);
  for (int e = 1; e <= 4; ++e) {
    cos.step();
    CHECK(cos.get_last_lr() == Approx(0.2 + 0.8 * (1 + std::cos(M_PI * e / 4)) / 2));
  }
}

TEST_CASE("optimiser misuse is a clear error", "[nn][optim][errors]") {
  Tensor p = start_param(Device("cpu"));
  CHECK_THROWS_WITH(nn::SGD({}, nn::SGDOptions(0.1)), Catch::Contains("empty parameter list"));
  CHECK_THROWS_AS(nn::SGD({p}, nn::SGDOptions(-1)), ValueError);
  CHECK_THROWS_WITH(nn::SGD({p}, nn::SGDOptions(0.1).nesterov(true)), Catch::Contains("nesterov"));
  CHECK_THROWS_AS(nn::Adam({p}, nn::AdamOptions().beta1(1.0)), ValueError);
  CHECK_THROWS_WITH(nn::SGD({p, p}, nn::SGDOptions(0.1)), Catch::Contains("twice"));
}

// Two Gaussian blobs, labels 0/1: Linear-ReLU-Linear with SGD must separate them, and
// cpu and sim:0 (the same kernels) must give the same losses.
std::vector<float> fit(Device d) {
  manual_seed(1);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(2, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 2)});
  net->to(d);
  nn::SGD opt(net->parameters(), nn::SGDOptions(0.1).momentum(0.9));
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int i = 0; i < 64; ++i) {
    const int y = i % 2;
    xs.push_back((y ? 1.5f : -1.5f) + 0.3f * std::sin(i * 1.7f));
    xs.push_back((y ? -1.0f : 1.0f) + 0.3f * std::cos(i * 2.3f));
    ys.push_back(y);
  }
  const Tensor x = from_vector<float>(xs, {64, 2}, TensorOptions().device(d));
  const Tensor t = from_vector<int64_t>(ys, {64}, TensorOptions().dtype(DType::kInt64).device(d));
  std::vector<float> losses;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net->forward(x), t);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}

TEST_CASE("an MLP learns a separable problem, identically on cpu and sim:0", "[nn][optim]") {
  const std::vector<float> cpu = fit(Device("cpu")), sim = fit(Device("sim:0"));
  CHECK(cpu.front() > 0.3f);
  CHECK(cpu.back() < 0.05f);
  CHECK(cpu == sim);  // the same kernels in the same order: bit for bit
}

}  // namespace
}  // namespace streamgrad

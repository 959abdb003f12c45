// RMSprop and Adagrad against PyTorch's documented update rules computed here in double
// precision, on cpu and sim:0; per-group options; state that resumes bit for bit from a
// checkpoint file; out-of-range options refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

// loss = sum(c * p^2) / 2 with c = {1, 3}: the gradient is c * p.
const std::vector<double> kStart{1.5, -2.0}, kCurve{1.0, 3.0};

Tensor start_param(Device d) {
  return from_vector<double>(kStart, {2}, TensorOptions().dtype(DType::kFloat64).device(d))
      .requires_grad_();
}

void run(nn::Optimizer& opt, const std::vector<Tensor>& ps, int steps) {
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    for (const Tensor& p : ps) {
      const Tensor c = from_vector<double>(kCurve, {2}, TensorOptions().dtype(DType::kFloat64).device(p.device()));
      mul(sum(mul(c, mul(p, p))), 0.5).backward();
    }
    opt.step();
  }
}

struct RMSpropRef {
  double lr, alpha, eps, wd, momentum;
  bool centered;
  std::vector<double> p = kStart, v{0, 0}, gavg{0, 0}, buf{0, 0};
  void step() {
    for (int i = 0; i < 2; ++i) {
      const double g = kCurve[i] * p[i] + wd * p[i];
      v[i] = alpha * v[i] + (1 - alpha) * g * g;
      double denom = v[i];
      if (centered) {
        gavg[i] = alpha * gavg[i] + (1 - alpha) * g;
        denom -= gavg[i] * gavg[i];
      }
      denom = std::sqrt(denom) + eps;
      if (momentum > 0) {
        buf[i] = momentum * buf[i] + g / denom;
        p[i] -= lr * buf[i];
      } else {
        p[i] -= lr * g / denom;
      }
    }
  }
};

void check_close(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = got.to_vector<double>();
  CHECK(g[0] == Approx(want[0]).epsilon(1e-10));
  CHECK(g[1] == Approx(want[1]).epsilon(1e-10));
}

TEST_CASE("RMSprop follows PyTorch's rule: plain, weight decay, momentum, centered", "[nn][optim]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const bool full = GENERATE(false, true);
  RMSpropRef ref{0.01, 0.99, 1e-8, 0, 0, false};
  nn::RMSpropOptions o;  // the reference's defaults: lr 1e-2, alpha 0.99, eps 1e-8
  if (full) {
    ref = RMSpropRef{0.02, 0.9, 1e-6, 0.05, 0.7, true};
    o = nn::RMSpropOptions(0.02).alpha(0.9).eps(1e-6).weight_decay(0.05).momentum(0.7).centered(true);
  }
  Tensor p = start_param(d);
  nn::RMSprop opt({p}, o);
  for (int s = 0; s < 5; ++s) ref.step();
  run(opt, {p}, 5);
  check_close(p, ref.p);
  CHECK(opt.state_dict().scalars.at("0.step") == 5);
  CHECK(opt.state_dict().tensors.size() == (full ? 3u : 1u));
}

TEST_CASE("Adagrad follows PyTorch's rule: lr_decay, weight decay, initial accumulator", "[nn][optim]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const double lr = 0.1, lr_decay = 0.05, wd = 0.02, init = 0.3, eps = 1e-10;
  Tensor p = start_param(d);
  nn::Adagrad opt({p}, nn::AdagradOptions(lr).lr_decay(lr_decay).weight_decay(wd)
                            .initial_accumulator_value(init).eps(eps));
  std::vector<double> want = kStart, acc{init, init};
  for (int t = 1; t <= 5; ++t) {
    const double clr = lr / (1 + (t - 1) * lr_decay);
    for (int i = 0; i < 2; ++i) {
      const double g = kCurve[i] * want[i] + wd * want[i];
      acc[i] += g * g;
      want[i] -= clr * g / (std::sqrt(acc[i]) + eps);
    }
  }
  run(opt, {p}, 5);
  check_close(p, want);
  // The reference's defaults: lr 1e-2, eps 1e-10.
  const nn::AdagradOptions defaults;
  CHECK(defaults.lr() == 1e-2);
  CHECK(defaults.eps() == 1e-10);
}

TEST_CASE("RMSprop and Adagrad groups take their own options", "[nn][optim][groups]") {
  Tensor a = start_param(Device("cpu")), b = start_param(Device("cpu"));
  nn::RMSprop opt(std::vector<nn::OptimizerParamGroup>{
                      nn::OptimizerParamGroup({a}),
                      nn::OptimizerParamGroup({b}, nn::RMSpropOptions(0.05).momentum(0.5))},
                  nn::RMSpropOptions(0.01));
  RMSpropRef ra{0.01, 0.99, 1e-8, 0, 0, false}, rb{0.05, 0.99, 1e-8, 0, 0.5, false};
  for (int s = 0; s < 3; ++s) {
    ra.step();
    rb.step();
  }
  run(opt, {a, b}, 3);
  check_close(a, ra.p);
  check_close(b, rb.p);
  CHECK_THROWS_WITH(nn::Adagrad(std::vector<nn::OptimizerParamGroup>{nn::OptimizerParamGroup(
                                    {a}, nn::RMSpropOptions())}),
                    Catch::Contains("are not AdagradOptions"));
}

struct Two : nn::Module {
  explicit Two(Device d) : Module("Two") {
    a = register_parameter("a", start_param(d));
    b = register_parameter("b", start_param(d));
  }
  Tensor forward(const Tensor& x) override { return x; }
  Tensor a, b;
};

TEST_CASE("RMSprop and Adagrad resume from a checkpoint bit for bit", "[nn][optim][checkpoint]") {
  const bool rms = GENERATE(true, false);
  const Device d(GENERATE(from_range(testing::device_names())));
  const std::string dir = std::getenv("TEST_TMPDIR") != nullptr ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string path = dir + (rms ? "/rmsprop.safetensors" : "/adagrad.safetensors");
  auto make = [&](Two& m, double lr) -> std::unique_ptr<nn::Optimizer> {
    const std::vector<nn::OptimizerParamGroup> groups{nn::OptimizerParamGroup({m.a}),
                                                      nn::OptimizerParamGroup({m.b})};
    if (rms) {
      return std::make_unique<nn::RMSprop>(groups,
                                           nn::RMSpropOptions(lr).momentum(0.9).centered(true));
    }
    return std::make_unique<nn::Adagrad>(groups, nn::AdagradOptions(lr).lr_decay(0.1));
  };
  Two m1(d), m2(d);
  auto o1 = make(m1, 0.03);
  run(*o1, {m1.a, m1.b}, 3);
  o1->param_groups()[1].options().set_lr(0.007);
  nn::save_checkpoint(path, m1, o1.get());
  auto o2 = make(m2, 0.5);
  nn::load_checkpoint(path, m2, o2.get());
  CHECK(o2->state_dict().scalars == o1->state_dict().scalars);
  run(*o1, {m1.a, m1.b}, 3);
  run(*o2, {m2.a, m2.b}, 3);
  CHECK(m1.a.to_vector<double>() == m2.a.to_vector<double>());
  CHECK(m1.b.to_vector<double>() == m2.b.to_vector<double>());
}

TEST_CASE("RMSprop and Adagrad refuse out-of-range options", "[nn][optim][errors]") {
  Tensor p = start_param(Device("cpu"));
  CHECK_THROWS_WITH(nn::RMSprop({p}, nn::RMSpropOptions().alpha(-0.1)), Catch::Contains("alpha -0.1"));
  CHECK_THROWS_WITH(nn::RMSprop({p}, nn::RMSpropOptions(-1)), Catch::Contains("learning rate -1"));
  CHECK_THROWS_WITH(nn::Adagrad({p}, nn::AdagradOptions().lr_decay(-1)), Catch::Contains("lr_decay -1"));
  CHECK_THROWS_WITH(nn::Adagrad({p}, nn::AdagradOptions().initial_accumulator_value(-2)),
                    Catch::Contains("initial_accumulator_value -2"));
  CHECK_THROWS_WITH(nn::Adagrad({}, nn::AdagradOptions()), Catch::Contains("empty parameter list"));
}

}  // namespace
}  // namespace streamgrad

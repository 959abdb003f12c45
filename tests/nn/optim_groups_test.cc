// Parameter groups (nn/optimizer.h) against PyTorch's documented update rules computed
// here in double precision: each group's own lr, weight decay and momentum honoured, on
// the per-tensor and the foreach paths, on cpu and sim:0; add_param_group and
// param_groups() edits; one foreach launch per (group, device, dtype); state dicts and
// checkpoint files carry the groups and refuse ones that do not match.
#include <catch2/catch.hpp>

#include <cmath>
#include <mutex>
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

// loss = sum_k sum(c * p_k^2) / 2 with c = {1, 3}: the gradient of p_k is c * p_k.
const std::vector<double> kCurve{1.0, 3.0};

Tensor param(Device d, double a, double b) {
  return from_vector<double>({a, b}, {2}, TensorOptions().dtype(DType::kFloat64).device(d))
      .requires_grad_();
}

void step_n(nn::Optimizer& opt, const std::vector<Tensor>& ps, int steps) {
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss;
    for (const Tensor& p : ps) {
      const Tensor c = from_vector<double>(kCurve, {2}, TensorOptions().dtype(DType::kFloat64).device(p.device()));
      const Tensor l = mul(sum(mul(c, mul(p, p))), 0.5);
      loss = loss.defined() ? add(loss, l) : l;
    }
    loss.backward();
    opt.step();
  }
}

// The reference's AdamW step for one parameter (decoupled decay, bias correction).
struct AdamRef {
  std::vector<double> p, m = {0, 0}, v = {0, 0};
  void step(int t, double lr, double wd, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8) {
    for (int i = 0; i < 2; ++i) {
      const double g = kCurve[i] * p[i];
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
};

void check_close(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = got.to_vector<double>();
  CHECK(g[0] == Approx(want[0]).epsilon(1e-9));
  CHECK(g[1] == Approx(want[1]).epsilon(1e-9));
}

TEST_CASE("AdamW with a decay group and a no-decay group: each group's options", "[nn][optim][groups]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const bool foreach = GENERATE(false, true);
  Tensor w = param(d, 1.5, -2.0), bias = param(d, 0.5, 0.25), x = param(d, -1.0, 2.0);
  std::vector<nn::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{w});  // the defaults: decay 0.1
  groups.emplace_back(std::vector<Tensor>{bias},
                      nn::AdamOptions(0.02).weight_decay(0).foreach(foreach));
  groups.emplace_back(std::vector<Tensor>{x},  // a decay of its own
                      nn::AdamOptions(0.03).weight_decay(0.2).beta1(0.8).foreach(foreach));
  nn::AdamW opt(groups, nn::AdamOptions(0.05).weight_decay(0.1).foreach(foreach));
  REQUIRE(opt.param_groups().size() == 3);
  CHECK(opt.param_groups()[0].options().get_lr() == 0.05);
  CHECK(opt.param_groups()[1].options().get_lr() == 0.02);
  AdamRef rw{{1.5, -2.0}}, rb{{0.5, 0.25}}, rx{{-1.0, 2.0}};
  for (int t = 1; t <= 4; ++t) {
    rw.step(t, 0.05, 0.1);
    rb.step(t, 0.02, 0);
    rx.step(t, 0.03, 0.2, 0.8);
  }
  step_n(opt, {w, bias, x}, 4);
  check_close(w, rw.p);
  check_close(bias, rb.p);
  check_close(x, rx.p);
  // A scheduler's or user's change of one group's lr applies from the next step.
  opt.param_groups()[1].options().set_lr(0.001);
  rw.step(5, 0.05, 0.1);
  rb.step(5, 0.001, 0);
  rx.step(5, 0.03, 0.2, 0.8);
  step_n(opt, {w, bias, x}, 1);
  check_close(x, rx.p);
  check_close(w, rw.p);
  check_close(bias, rb.p);
}

TEST_CASE("SGD groups: own lr and momentum; add_param_group takes the defaults", "[nn][optim][groups]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const bool foreach = GENERATE(false, true);
  Tensor a = param(d, 1.5, -2.0), b = param(d, -1.0, 0.5), c = param(d, 2.0, 1.0);
  nn::SGD opt(std::vector<nn::OptimizerParamGroup>{nn::OptimizerParamGroup(
                  {b}, nn::SGDOptions(0.05).momentum(0.5).nesterov(true).foreach(foreach))},
              nn::SGDOptions(0.1).momentum(0.9).foreach(foreach));
  opt.add_param_group(nn::OptimizerParamGroup({a, c}));
  REQUIRE(opt.params().size() == 3);
  CHECK(opt.params()[1].impl() == a.impl());  // numbered across groups in order
  const auto& defaults = static_cast<const nn::SGDOptions&>(opt.param_groups()[1].options());
  CHECK(defaults.momentum() == 0.9);
  CHECK(defaults.lr() == 0.1);
  // The reference: b with lr 0.05, nesterov momentum 0.5; a and c with lr 0.1, momentum 0.9.
  struct Ref {
    std::vector<double> p, buf{0, 0};
    void step(int s, double lr, double mom, bool nesterov) {
      for (int i = 0; i < 2; ++i) {
        double g = kCurve[i] * p[i];
        buf[i] = s == 0 ? g : mom * buf[i] + g;
        p[i] -= lr * (nesterov ? g + mom * buf[i] : buf[i]);
      }
    }
  } ra{{1.5, -2.0}}, rb{{-1.0, 0.5}}, rc{{2.0, 1.0}};
  for (int s = 0; s < 3; ++s) {
    ra.step(s, 0.1, 0.9, false);
    rb.step(s, 0.05, 0.5, true);
    rc.step(s, 0.1, 0.9, false);
  }
  step_n(opt, {a, b, c}, 3);
  check_close(a, ra.p);
  check_close(b, rb.p);
  check_close(c, rc.p);
  // set_lr sets every group's; lr() reads group 0's.
  opt.set_lr(0.2);
  CHECK(opt.param_groups()[1].options().get_lr() == 0.2);
  CHECK(opt.lr() == 0.2);
}

class KernelLaunches : public LaunchObserver {
 public:
  KernelLaunches() { add_launch_observer(this); }
  ~KernelLaunches() override { remove_launch_observer(this); }
  void on_launch(const Stream&, const LaunchDesc& d) override {
    if (d.kind != LaunchKind::kKernel) return;
    std::lock_guard<std::mutex> lk(mu_);
    names_.push_back(d.name);
  }
  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lk(mu_);
    return names_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> names_;
};

TEST_CASE("the foreach path launches once per (group, device, dtype)", "[nn][optim][groups]") {
  const Device d("sim:0");
  std::vector<Tensor> ps;
  for (int i = 0; i < 6; ++i) ps.push_back(param(d, 0.5 + i, -1.0 - i));
  std::vector<nn::OptimizerParamGroup> groups{
      nn::OptimizerParamGroup({ps[0], ps[1], ps[2]}),
      nn::OptimizerParamGroup({ps[3], ps[4], ps[5]}, nn::AdamOptions(0.01).weight_decay(0))};
  nn::AdamW opt(groups);
  for (const Tensor& p : ps) p.set_grad(ones_like(p));
  KernelLaunches launches;
  opt.step();
  CHECK(launches.names() == std::vector<std::string>{"adamw_update", "adamw_update"});
}

TEST_CASE("group misuse is a clear ValueError", "[nn][optim][groups][errors]") {
  Tensor a = param(Device("cpu"), 1, 2), b = param(Device("cpu"), 3, 4);
  using Groups = std::vector<nn::OptimizerParamGroup>;
  CHECK_THROWS_WITH(nn::SGD(Groups{nn::OptimizerParamGroup({a}, nn::AdamOptions())},
                            nn::SGDOptions(0.1)),
                    Catch::Contains("parameter group 0's options are not SGDOptions"));
  CHECK_THROWS_WITH(nn::Adam(Groups{nn::OptimizerParamGroup({a}), nn::OptimizerParamGroup({a})},
                             nn::AdamOptions()),
                    Catch::Contains("appears twice"));
  CHECK_THROWS_WITH(nn::Adam(Groups{nn::OptimizerParamGroup({a}), nn::OptimizerParamGroup({})},
                             nn::AdamOptions()),
                    Catch::Contains("parameter group 1 has no parameters"));
  CHECK_THROWS_WITH(nn::SGD(Groups{nn::OptimizerParamGroup({a}, nn::SGDOptions(-0.5))},
                            nn::SGDOptions(0.1)),
                    Catch::Contains("learning rate -0.5"));
  nn::SGD opt({a}, nn::SGDOptions(0.1));
  CHECK_THROWS_WITH(opt.add_param_group(nn::OptimizerParamGroup({b}, nn::SGDOptions(0.1).momentum(2))),
                    Catch::Contains("momentum 2"));
  CHECK(opt.param_groups().size() == 1);
  // Options edited through param_groups() are checked when the optimiser steps.
  opt.param_groups()[0].options().set_lr(-1);
  a.set_grad(ones_like(a));
  CHECK_THROWS_WITH(opt.step(), Catch::Contains("learning rate -1"));
  CHECK(a.to_vector<double>() == std::vector<double>{1, 2});
  CHECK_THROWS_WITH(nn::OptimizerParamGroup({a}).options(), Catch::Contains("no options"));
}

std::vector<nn::OptimizerParamGroup> two_groups(const std::vector<Tensor>& ps) {
  return {nn::OptimizerParamGroup({ps[0], ps[1]}),
          nn::OptimizerParamGroup({ps[2]}, nn::AdamOptions(0.02).beta1(0.8).weight_decay(0))};
}

std::vector<Tensor> three_params(Device d) {
  return {param(d, 1.5, -2.0), param(d, 0.5, 0.25), param(d, -1.0, 3.0)};
}

void copy_values(const std::vector<Tensor>& from, std::vector<Tensor> to_) {
  NoGradGuard no_grad;
  for (size_t i = 0; i < from.size(); ++i) copy_(to_[i], from[i]);
}

TEST_CASE("a state dict carries the groups' options and resumes bit for bit", "[nn][optim][groups]") {
  const std::vector<Tensor> a = three_params(Device("cpu")), b = three_params(Device("cpu"));
  nn::AdamW first(two_groups(a), nn::AdamOptions(0.05).weight_decay(0.1));
  step_n(first, a, 3);
  first.param_groups()[1].options().set_lr(0.004);  // as a scheduler would
  const nn::OptimizerState s = first.state_dict();
  CHECK(s.scalars.at("groups") == 2);
  CHECK(s.scalars.at("group.0.params") == 2);
  CHECK(s.scalars.at("group.1.params") == 1);
  CHECK(s.scalars.at("group.1.lr") == 0.004);
  CHECK(s.scalars.at("group.1.beta1") == 0.8);
  CHECK(s.scalars.at("group.0.weight_decay") == 0.1);

  nn::AdamW second(two_groups(b));  // other defaults: the state's options replace them
  copy_values(a, b);
  second.load_state_dict(s);
  CHECK(second.param_groups()[0].options().get_lr() == 0.05);
  CHECK(second.param_groups()[1].options().get_lr() == 0.004);
  step_n(first, a, 2);
  step_n(second, b, 2);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].to_vector<double>() == b[i].to_vector<double>());
}

TEST_CASE("a state of other groups is refused, changing nothing", "[nn][optim][groups][errors]") {
  const std::vector<Tensor> a = three_params(Device("cpu"));
  nn::AdamW first(two_groups(a));
  step_n(first, a, 1);
  const nn::OptimizerState s = first.state_dict();

  const std::vector<Tensor> b = three_params(Device("cpu"));
  nn::AdamW one_group(b, nn::AdamOptions(0.3));
  CHECK_THROWS_WITH(one_group.load_state_dict(s),
                    Catch::Contains("holds 2 parameter groups but the optimizer has 1"));
  CHECK(one_group.lr() == 0.3);
  nn::AdamW other_split(std::vector<nn::OptimizerParamGroup>{nn::OptimizerParamGroup({b[0]}),
                                                            nn::OptimizerParamGroup({b[1], b[2]})},
                        nn::AdamOptions(0.3));
  CHECK_THROWS_WITH(other_split.load_state_dict(s),
                    Catch::Contains("parameter group 0 holds 1 parameters but the state's 2"));
  nn::OptimizerState bad = s;
  bad.scalars.erase("group.1.eps");
  nn::AdamW same(two_groups(b), nn::AdamOptions(0.3));
  CHECK_THROWS_WITH(same.load_state_dict(bad), Catch::Contains("lacks options of parameter group 1"));
  bad = s;
  bad.scalars["group.1.beta2"] = 1.5;
  CHECK_THROWS_WITH(same.load_state_dict(bad), Catch::Contains("betas (0.8, 1.5)"));
  CHECK(same.lr() == 0.3);
  CHECK(same.state_dict().tensors.empty());
  // A state without groups (an older checkpoint) sets every group's lr from "lr".
  nn::OptimizerState old = s;
  for (auto it = old.scalars.begin(); it != old.scalars.end();) {
    it = it->first == "groups" || it->first.rfind("group.", 0) == 0 ? old.scalars.erase(it) : ++it;
  }
  old.scalars["lr"] = 0.125;
  same.load_state_dict(old);
  CHECK(same.param_groups()[0].options().get_lr() == 0.125);
  CHECK(same.param_groups()[1].options().get_lr() == 0.125);
}

// A module holding three parameters, for checkpoint files.
struct Three : nn::Module {
  explicit Three(Device d) : Module("Three") {
    const std::vector<Tensor> ps = three_params(d);
    for (size_t i = 0; i < ps.size(); ++i) p.push_back(register_parameter("p" + std::to_string(i), ps[i]));
  }
  Tensor forward(const Tensor& x) override { return x; }
  std::vector<Tensor> p;
};

TEST_CASE("a checkpoint file round-trips the groups exactly", "[nn][optim][groups][checkpoint]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const std::string dir = std::getenv("TEST_TMPDIR") != nullptr ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string path = dir + "/groups.safetensors";
  Three m1(d), m2(d);
  nn::AdamW o1(two_groups(m1.p), nn::AdamOptions(0.05).weight_decay(0.1));
  step_n(o1, m1.p, 2);
  o1.param_groups()[1].options().set_lr(1.0 / 3);  // needs all 17 digits
  nn::save_checkpoint(path, m1, &o1);
  nn::AdamW o2(two_groups(m2.p), nn::AdamOptions(0.9));
  nn::load_checkpoint(path, m2, &o2);
  CHECK(o2.param_groups()[1].options().get_lr() == 1.0 / 3);
  CHECK(o2.state_dict().scalars == o1.state_dict().scalars);
  step_n(o1, m1.p, 2);
  step_n(o2, m2.p, 2);
  for (size_t i = 0; i < 3; ++i) CHECK(m1.p[i].to_vector<double>() == m2.p[i].to_vector<double>());
  Three m3(d);
  nn::AdamW one(m3.p, nn::AdamOptions(0.9));
  CHECK_THROWS_AS(nn::load_checkpoint(path, m3, &one), ValueError);
  CHECK(one.lr() == 0.9);
}

}  // namespace
}  // namespace streamgrad

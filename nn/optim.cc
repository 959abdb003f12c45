#include "nn/optim.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/optim_util.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
using optim_internal::check_lr;
using optim_internal::options_of;
using optim_internal::read_all;

std::unique_ptr<OptimizerOptions> SGDOptions::clone() const {
  return std::make_unique<SGDOptions>(*this);
}

std::map<std::string, double> SGDOptions::numbers() const {
  return {{"lr", lr_},
          {"momentum", momentum_},
          {"dampening", dampening_},
          {"weight_decay", weight_decay_},
          {"nesterov", nesterov_ ? 1.0 : 0.0}};
}

bool SGDOptions::set_numbers(const std::map<std::string, double>& in) {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0, nesterov = 0;
  if (!read_all(in, {{"lr", &lr},
                     {"momentum", &momentum},
                     {"dampening", &dampening},
                     {"weight_decay", &weight_decay},
                     {"nesterov", &nesterov}})) {
    return false;
  }
  lr_ = lr;
  momentum_ = momentum;
  dampening_ = dampening;
  weight_decay_ = weight_decay;
  nesterov_ = nesterov != 0;
  return true;
}

std::unique_ptr<OptimizerOptions> AdamOptions::clone() const {
  return std::make_unique<AdamOptions>(*this);
}

std::map<std::string, double> AdamOptions::numbers() const {
  return {{"lr", lr_},     {"beta1", beta1_},
          {"beta2", beta2_}, {"eps", eps_},
          {"weight_decay", weight_decay_}};
}

bool AdamOptions::set_numbers(const std::map<std::string, double>& in) {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  if (!read_all(in, {{"lr", &lr},
                     {"beta1", &beta1},
                     {"beta2", &beta2},
                     {"eps", &eps},
                     {"weight_decay", &weight_decay}})) {
    return false;
  }
  lr_ = lr;
  beta1_ = beta1;
  beta2_ = beta2;
  eps_ = eps;
  weight_decay_ = weight_decay;
  return true;
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& defaults)
    : SGD(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, defaults) {}

SGD::SGD(const std::vector<OptimizerParamGroup>& groups, const SGDOptions& defaults)
    : Optimizer(defaults.clone(), "SGD") {
  init(groups);
}

void SGD::check_options(const OptimizerOptions& opts, const std::string& where) const {
  const SGDOptions& o = options_of<SGDOptions>(name_, "SGDOptions", opts, where);
  check_lr(name_, where, o.lr());
  SG_CHECK(o.momentum() >= 0 && o.momentum() < 1 && o.dampening() >= 0 && o.dampening() <= 1 &&
               o.weight_decay() >= 0,
           ValueError, "SGD: ", where, ": momentum ", o.momentum(),
           " must be in [0, 1), dampening ", o.dampening(), " in [0, 1] and weight_decay ",
           o.weight_decay(), " >= 0");
  SG_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0), ValueError, "SGD: ",
           where, ": nesterov needs momentum > 0 and dampening 0");
}

void SGD::step() {
  check_groups();
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const SGDOptions& o = static_cast<const SGDOptions&>(param_groups()[g].options());
    if (o.foreach()) {
      step_foreach(g, o);
    } else {
      step_per_tensor(g, o);
    }
  }
}

void SGD::step_per_tensor(size_t group, const SGDOptions& o) {
  NoGradGuard no_grad;
  const size_t begin = group_begin(group);
  const size_t end = begin + param_groups()[group].params().size();
  for (size_t i = begin; i < end; ++i) {
    Tensor p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (o.weight_decay() != 0) g = add(g, p, o.weight_decay());
    if (o.momentum() != 0) {
      Tensor& buf = state(i, "momentum_buffer");
      if (!buf.defined()) {
        buf = clone(g);  // the first step takes the gradient as is (PyTorch)
      } else {
        mul_(buf, o.momentum());
        add_(buf, g, 1 - o.dampening());
      }
      g = o.nesterov() ? add(g, buf, o.momentum()) : buf;
    }
    add_(p, g, -o.lr());
  }
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& defaults, bool decoupled)
    : Adam(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, defaults,
           decoupled) {}

Adam::Adam(const std::vector<OptimizerParamGroup>& groups, const AdamOptions& defaults,
           bool decoupled)
    : Optimizer(defaults.clone(), decoupled ? "AdamW" : "Adam"), decoupled_(decoupled) {
  init(groups);
}

void Adam::check_options(const OptimizerOptions& opts, const std::string& where) const {
  const AdamOptions& o = options_of<AdamOptions>(name_, "AdamOptions", opts, where);
  check_lr(name_, where, o.lr());
  SG_CHECK(o.beta1() >= 0 && o.beta1() < 1 && o.beta2() >= 0 && o.beta2() < 1 && o.eps() >= 0 &&
               o.weight_decay() >= 0,
           ValueError, name_, ": ", where, ": betas (", o.beta1(), ", ", o.beta2(),
           ") must be in [0, 1), eps ", o.eps(), " and weight_decay ", o.weight_decay(), " >= 0");
}

void Adam::step() {
  check_groups();
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const AdamOptions& o = static_cast<const AdamOptions&>(param_groups()[g].options());
    if (o.foreach()) {
      step_foreach(g, o);
    } else {
      step_per_tensor(g, o);
    }
  }
}

void Adam::step_per_tensor(size_t group, const AdamOptions& o) {
  NoGradGuard no_grad;
  const double b1 = o.beta1(), b2 = o.beta2(), lr = o.lr();
  const size_t begin = group_begin(group);
  const size_t end = begin + param_groups()[group].params().size();
  for (size_t i = begin; i < end; ++i) {
    Tensor p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (o.weight_decay() != 0) {
      if (decoupled_) {
        mul_(p, 1 - lr * o.weight_decay());
      } else {
        g = add(g, p, o.weight_decay());
      }
    }
    Tensor& m = state(i, "exp_avg");
    Tensor& v = state(i, "exp_avg_sq");
    if (!m.defined()) {
      m = zeros_like(p);
      v = zeros_like(p);
    }
    const double t = ++scalars_[absl::StrCat(i, ".step")];
    mul_(m, b1);
    add_(m, g, 1 - b1);
    mul_(v, b2);
    add_(v, mul(g, g), 1 - b2);
    const double bias1 = 1 - std::pow(b1, t), bias2 = 1 - std::pow(b2, t);
    const Tensor denom = add(div(sqrt(v), std::sqrt(bias2)), o.eps());
    add_(p, div(m, denom), -lr / bias1);
  }
}

}  // namespace nn
}  // namespace streamgrad

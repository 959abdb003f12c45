#include "nn/optim.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name)
    : params_(std::move(params)), lr_(lr), name_(name), state_(params_.size()) {
  SG_CHECK(!params_.empty(), ValueError, name_, ": got an empty parameter list");
  std::set<const TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    SG_CHECK(p.defined() && p.is_leaf() && p.requires_grad(), ValueError, name_,
             ": parameter ", i, " must be a leaf that requires grad, got ",
             p.defined() ? p.describe() : std::string("an undefined tensor"));
    SG_CHECK(seen.insert(p.impl()).second, ValueError, name_, ": parameter ", i,
             " appears twice in the list");
  }
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  SG_CHECK(lr >= 0 && std::isfinite(lr), ValueError, name_, ": learning rate ", lr,
           " must be finite and >= 0");
  lr_ = lr;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      zero_(g);
    }
  }
}

Tensor& Optimizer::state(size_t i, const std::string& name) { return state_[i][name]; }

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (size_t i = 0; i < state_.size(); ++i) {
    for (const auto& [name, t] : state_[i]) {
      if (t.defined()) out.tensors.emplace_back(absl::StrCat(i, ".", name), t);
    }
  }
  out.scalars = scalars_;
  out.scalars["lr"] = lr_;
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& s) {
  std::vector<std::map<std::string, Tensor>> loaded(params_.size());
  for (const auto& [key, t] : s.tensors) {
    const size_t dot = key.find('.');
    size_t i = params_.size();
    if (dot != std::string::npos && dot > 0 &&
        key.find_first_not_of("0123456789") == dot) {
      i = std::stoul(key.substr(0, dot));
    }
    SG_CHECK(i < params_.size(), ValueError, name_, ": state key '", key,
             "' names no parameter (expected '<index>.<name>' with index below ",
             params_.size(), ")");
    SG_CHECK(t.defined() && t.sizes() == params_[i].sizes() && t.dtype() == params_[i].dtype(),
             ValueError, name_, ": state '", key, "' is ",
             t.defined() ? t.describe() : std::string("undefined"), " but parameter ", i, " is ",
             params_[i].describe());
    // Copied onto the parameter's device: the checkpoint may come from another one.
    NoGradGuard no_grad;
    loaded[i][key.substr(dot + 1)] = clone(to(t, params_[i].device()));
  }
  const auto lr = s.scalars.find("lr");
  if (lr != s.scalars.end()) set_lr(lr->second);
  state_ = std::move(loaded);
  scalars_ = s.scalars;
  scalars_.erase("lr");
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& o)
    : Optimizer(std::move(params), o.lr(), "SGD"), options(o) {
  SG_CHECK(o.momentum() >= 0 && o.momentum() < 1 && o.dampening() >= 0 && o.dampening() <= 1 &&
               o.weight_decay() >= 0,
           ValueError, "SGD: momentum ", o.momentum(), " must be in [0, 1), dampening ",
           o.dampening(), " in [0, 1] and weight_decay ", o.weight_decay(), " >= 0");
  SG_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0), ValueError,
           "SGD: nesterov needs momentum > 0 and dampening 0");
}

void SGD::step() {
  if (options.foreach()) {
    step_foreach();
  } else {
    step_per_tensor();
  }
}

void SGD::step_per_tensor() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options.weight_decay() != 0) g = add(g, p, options.weight_decay());
    if (options.momentum() != 0) {
      Tensor& buf = state(i, "momentum_buffer");
      if (!buf.defined()) {
        buf = clone(g);  // the first step takes the gradient as is (PyTorch)
      } else {
        mul_(buf, options.momentum());
        add_(buf, g, 1 - options.dampening());
      }
      g = options.nesterov() ? add(g, buf, options.momentum()) : buf;
    }
    add_(p, g, -lr_);
  }
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o.lr(), decoupled ? "AdamW" : "Adam"),
      options(o),
      decoupled_(decoupled) {
  SG_CHECK(o.beta1() >= 0 && o.beta1() < 1 && o.beta2() >= 0 && o.beta2() < 1 && o.eps() >= 0 &&
               o.weight_decay() >= 0,
           ValueError, name_, ": betas (", o.beta1(), ", ", o.beta2(),
           ") must be in [0, 1), eps ", o.eps(), " and weight_decay ", o.weight_decay(), " >= 0");
}

void Adam::step() {
  if (options.foreach()) {
    step_foreach();
  } else {
    step_per_tensor();
  }
}

void Adam::step_per_tensor() {
  NoGradGuard no_grad;
  const double b1 = options.beta1(), b2 = options.beta2();
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options.weight_decay() != 0) {
      if (decoupled_) {
        mul_(p, 1 - lr_ * options.weight_decay());
      } else {
        g = add(g, p, options.weight_decay());
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
    const Tensor denom = add(div(sqrt(v), std::sqrt(bias2)), options.eps());
    add_(p, div(m, denom), -lr_ / bias1);
  }
}

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::step() { optimizer_.set_lr(lr_at(++epoch_)); }

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  SG_CHECK(step_size > 0 && gamma >= 0, ValueError, "StepLR: step_size ", step_size,
           " must be positive and gamma ", gamma, " >= 0");
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  SG_CHECK(t_max > 0 && eta_min >= 0, ValueError, "CosineAnnealingLR: T_max ", t_max,
           " must be positive and eta_min ", eta_min, " >= 0");
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  const double pi = std::acos(-1.0);
  return eta_min_ + (base_lr_ - eta_min_) * (1 + std::cos(pi * epoch / t_max_)) / 2;
}

}  // namespace nn
}  // namespace streamgrad

// RMSprop and Adagrad, per tensor, with the update rules of PyTorch's documentation
// (torch.optim.RMSprop, torch.optim.Adagrad).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/optim.h"
#include "nn/optim_util.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

using optim_internal::check_lr;
using optim_internal::options_of;
using optim_internal::read_all;

std::unique_ptr<OptimizerOptions> RMSpropOptions::clone() const {
  return std::make_unique<RMSpropOptions>(*this);
}

std::map<std::string, double> RMSpropOptions::numbers() const {
  return {{"lr", lr_},
          {"alpha", alpha_},
          {"eps", eps_},
          {"weight_decay", weight_decay_},
          {"momentum", momentum_},
          {"centered", centered_ ? 1.0 : 0.0}};
}

bool RMSpropOptions::set_numbers(const std::map<std::string, double>& in) {
  double lr = 0, alpha = 0, eps = 0, weight_decay = 0, momentum = 0, centered = 0;
  if (!read_all(in, {{"lr", &lr},
                     {"alpha", &alpha},
                     {"eps", &eps},
                     {"weight_decay", &weight_decay},
                     {"momentum", &momentum},
                     {"centered", &centered}})) {
    return false;
  }
  lr_ = lr;
  alpha_ = alpha;
  eps_ = eps;
  weight_decay_ = weight_decay;
  momentum_ = momentum;
  centered_ = centered != 0;
  return true;
}

std::unique_ptr<OptimizerOptions> AdagradOptions::clone() const {
  return std::make_unique<AdagradOptions>(*this);
}

std::map<std::string, double> AdagradOptions::numbers() const {
  return {{"lr", lr_},
          {"lr_decay", lr_decay_},
          {"weight_decay", weight_decay_},
          {"initial_accumulator_value", initial_accumulator_value_},
          {"eps", eps_}};
}

bool AdagradOptions::set_numbers(const std::map<std::string, double>& in) {
  double lr = 0, lr_decay = 0, weight_decay = 0, initial = 0, eps = 0;
  if (!read_all(in, {{"lr", &lr},
                     {"lr_decay", &lr_decay},
                     {"weight_decay", &weight_decay},
                     {"initial_accumulator_value", &initial},
                     {"eps", &eps}})) {
    return false;
  }
  lr_ = lr;
  lr_decay_ = lr_decay;
  weight_decay_ = weight_decay;
  initial_accumulator_value_ = initial;
  eps_ = eps;
  return true;
}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& defaults)
    : RMSprop(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))},
              defaults) {}

RMSprop::RMSprop(const std::vector<OptimizerParamGroup>& groups, const RMSpropOptions& defaults)
    : Optimizer(defaults.clone(), "RMSprop") {
  init(groups);
}

void RMSprop::check_options(const OptimizerOptions& opts, const std::string& where) const {
  const RMSpropOptions& o = options_of<RMSpropOptions>(name_, "RMSpropOptions", opts, where);
  check_lr(name_, where, o.lr());
  SG_CHECK(o.alpha() >= 0 && o.eps() >= 0 && o.weight_decay() >= 0 && o.momentum() >= 0,
           ValueError, "RMSprop: ", where, ": alpha ", o.alpha(), ", eps ", o.eps(),
           ", weight_decay ", o.weight_decay(), " and momentum ", o.momentum(), " must be >= 0");
}

void RMSprop::step() {
  check_groups();
  NoGradGuard no_grad;
  for (size_t group = 0; group < param_groups().size(); ++group) {
    const auto& o = static_cast<const RMSpropOptions&>(param_groups()[group].options());
    const double alpha = o.alpha();
    const size_t begin = group_begin(group);
    const size_t end = begin + param_groups()[group].params().size();
    for (size_t i = begin; i < end; ++i) {
      Tensor p = params_[i];
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (o.weight_decay() != 0) g = add(g, p, o.weight_decay());
      ++scalars_[absl::StrCat(i, ".step")];
      Tensor& square_avg = state(i, "square_avg");
      if (!square_avg.defined()) square_avg = zeros_like(p);
      mul_(square_avg, alpha);
      add_(square_avg, mul(g, g), 1 - alpha);
      Tensor avg;
      if (o.centered()) {
        Tensor& grad_avg = state(i, "grad_avg");
        if (!grad_avg.defined()) grad_avg = zeros_like(p);
        mul_(grad_avg, alpha);
        add_(grad_avg, g, 1 - alpha);
        avg = add(sqrt(sub(square_avg, mul(grad_avg, grad_avg))), o.eps());
      } else {
        avg = add(sqrt(square_avg), o.eps());
      }
      if (o.momentum() > 0) {
        Tensor& buf = state(i, "momentum_buffer");
        if (!buf.defined()) buf = zeros_like(p);
        mul_(buf, o.momentum());
        add_(buf, div(g, avg));
        add_(p, buf, -o.lr());
      } else {
        add_(p, div(g, avg), -o.lr());
      }
    }
  }
}

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& defaults)
    : Adagrad(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))},
              defaults) {}

Adagrad::Adagrad(const std::vector<OptimizerParamGroup>& groups, const AdagradOptions& defaults)
    : Optimizer(defaults.clone(), "Adagrad") {
  init(groups);
}

void Adagrad::check_options(const OptimizerOptions& opts, const std::string& where) const {
  const AdagradOptions& o = options_of<AdagradOptions>(name_, "AdagradOptions", opts, where);
  check_lr(name_, where, o.lr());
  SG_CHECK(o.lr_decay() >= 0 && o.weight_decay() >= 0 && o.initial_accumulator_value() >= 0 &&
               o.eps() >= 0,
           ValueError, "Adagrad: ", where, ": lr_decay ", o.lr_decay(), ", weight_decay ",
           o.weight_decay(), ", initial_accumulator_value ", o.initial_accumulator_value(),
           " and eps ", o.eps(), " must be >= 0");
}

void Adagrad::step() {
  check_groups();
  NoGradGuard no_grad;
  for (size_t group = 0; group < param_groups().size(); ++group) {
    const auto& o = static_cast<const AdagradOptions&>(param_groups()[group].options());
    const size_t begin = group_begin(group);
    const size_t end = begin + param_groups()[group].params().size();
    for (size_t i = begin; i < end; ++i) {
      Tensor p = params_[i];
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (o.weight_decay() != 0) g = add(g, p, o.weight_decay());
      const double t = ++scalars_[absl::StrCat(i, ".step")];
      Tensor& sum = state(i, "sum");
      if (!sum.defined()) sum = full_like(p, o.initial_accumulator_value());
      const double clr = o.lr() / (1 + (t - 1) * o.lr_decay());
      add_(sum, mul(g, g));
      add_(p, div(g, add(sqrt(sum), o.eps())), -clr);
    }
  }
}

}  // namespace nn
}  // namespace streamgrad

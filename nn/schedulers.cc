#include "nn/schedulers.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace {

const double kPi = std::acos(-1.0);

double state_value(const char* op, const SchedulerState& s, const std::string& key) {
  const auto it = s.find(key);
  SG_CHECK(it != s.end(), ValueError, op, "::load_state_dict: the state has no '", key,
           "'; pass a state that ", op, "::state_dict() returned");
  return it->second;
}

}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer, const char* name)
    : optimizer_(optimizer), name_(name) {
  for (OptimizerParamGroup& g : optimizer.param_groups()) {
    if (!g.has_initial_lr()) g.set_initial_lr(g.options().get_lr());
    base_lrs_.push_back(g.initial_lr());
  }
}

std::vector<double> LRScheduler::lrs_at(int64_t epoch) const {
  const size_t groups = optimizer_.param_groups().size();
  SG_CHECK(groups == base_lrs_.size(), ValueError, name_, ": the optimizer has ", groups,
           " parameter groups but had ", base_lrs_.size(),
           " when the scheduler was made; make the scheduler after adding every group");
  std::vector<double> lrs(groups);
  for (size_t g = 0; g < groups; ++g) lrs[g] = lr_at(epoch, g);
  return lrs;
}

void LRScheduler::apply() {
  const std::vector<double> lrs = lrs_at(epoch_);
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.param_groups()[g].options().set_lr(lrs[g]);
}

void LRScheduler::step() {
  // Computed before anything changes: a step OneCycleLR refuses leaves all as it was.
  const std::vector<double> lrs = lrs_at(epoch_ + 1);
  ++epoch_;
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.param_groups()[g].options().set_lr(lrs[g]);
}

std::vector<double> LRScheduler::get_last_lrs() const {
  std::vector<double> out;
  for (const OptimizerParamGroup& g : optimizer_.param_groups()) out.push_back(g.options().get_lr());
  return out;
}

SchedulerState LRScheduler::state_dict() const {
  SchedulerState s{{"last_epoch", static_cast<double>(epoch_)}};
  for (size_t g = 0; g < base_lrs_.size(); ++g) s[absl::StrCat("base_lr.", g)] = base_lrs_[g];
  return s;
}

void LRScheduler::load_state_dict(const SchedulerState& s) {
  const double epoch = state_value(name_, s, "last_epoch");
  SG_CHECK(epoch >= 0 && epoch == std::floor(epoch), ValueError, name_,
           "::load_state_dict: last_epoch ", epoch, " must be a whole number >= 0");
  std::vector<double> base(base_lrs_.size());
  for (size_t g = 0; g < base.size(); ++g) {
    base[g] = state_value(name_, s, absl::StrCat("base_lr.", g));
  }
  SG_CHECK(s.count(absl::StrCat("base_lr.", base.size())) == 0, ValueError, name_,
           "::load_state_dict: the state is of more than the optimizer's ", base.size(),
           " parameter groups");
  base_lrs_ = std::move(base);
  epoch_ = static_cast<int64_t>(epoch);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  SG_CHECK(step_size > 0 && gamma >= 0, ValueError, "StepLR: step_size ", step_size,
           " must be positive and gamma ", gamma, " >= 0");
  apply();
}

double StepLR::lr_at(int64_t epoch, size_t g) const {
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(t_max), eta_min_(eta_min) {
  SG_CHECK(t_max > 0 && eta_min >= 0, ValueError, "CosineAnnealingLR: T_max ", t_max,
           " must be positive and eta_min ", eta_min, " >= 0");
  apply();
}

double CosineAnnealingLR::lr_at(int64_t epoch, size_t g) const {
  return eta_min_ + (base_lrs_[g] - eta_min_) * (1 + std::cos(kPi * epoch / t_max_)) / 2;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  SG_CHECK(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1 &&
               total_iters > 0,
           ValueError, "LinearLR: start_factor ", start_factor, " must be in (0, 1], end_factor ",
           end_factor, " in [0, 1] and total_iters ", total_iters, " positive");
  apply();
}

double LinearLR::lr_at(int64_t epoch, size_t g) const {
  const double done = static_cast<double>(std::min(epoch, total_iters_)) / total_iters_;
  return base_lrs_[g] * (start_factor_ + (end_factor_ - start_factor_) * done);
}

LambdaLR::LambdaLR(Optimizer& optimizer, Fn fn)
    : LambdaLR(optimizer, std::vector<Fn>(optimizer.param_groups().size(), std::move(fn))) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Fn> fns)
    : LRScheduler(optimizer, "LambdaLR"), fns_(std::move(fns)) {
  SG_CHECK(fns_.size() == base_lrs_.size(), ValueError, "LambdaLR: got ", fns_.size(),
           " functions for ", base_lrs_.size(), " parameter groups; pass one, or one per group");
  for (size_t g = 0; g < fns_.size(); ++g) {
    SG_CHECK(static_cast<bool>(fns_[g]), ValueError, "LambdaLR: function ", g, " is empty");
  }
  apply();
}

double LambdaLR::lr_at(int64_t epoch, size_t g) const { return base_lrs_[g] * fns_[g](epoch); }

SequentialLR::SequentialLR(Optimizer& optimizer,
                           std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer, "SequentialLR"),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  SG_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size(), ValueError,
           "SequentialLR: got ", schedulers_.size(), " schedulers and ", milestones_.size(),
           " milestones; expected at least one scheduler and one milestone fewer");
  for (size_t k = 0; k < schedulers_.size(); ++k) {
    SG_CHECK(schedulers_[k] != nullptr && &schedulers_[k]->optimizer_ == &optimizer, ValueError,
             "SequentialLR: scheduler ", k, " is null or acts on another optimizer");
  }
  for (size_t k = 0; k < milestones_.size(); ++k) {
    SG_CHECK(milestones_[k] > (k == 0 ? 0 : milestones_[k - 1]), ValueError,
             "SequentialLR: milestone ", k, " (", milestones_[k],
             ") must be positive and above the one before");
  }
  apply();
}

double SequentialLR::lr_at(int64_t epoch, size_t g) const {
  const size_t k = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                   milestones_.begin();
  return schedulers_[k]->lr_at(k == 0 ? epoch : epoch - milestones_[k - 1], g);
}

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start,
                       const std::string& anneal_strategy, double div_factor,
                       double final_div_factor, bool three_phase)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr),
                 total_steps, pct_start, anneal_strategy, div_factor, final_div_factor,
                 three_phase) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       double pct_start, const std::string& anneal_strategy, double div_factor,
                       double final_div_factor, bool three_phase)
    : LRScheduler(optimizer, "OneCycleLR"),
      max_lrs_(std::move(max_lrs)),
      total_steps_(total_steps),
      cos_(anneal_strategy == "cos"),
      final_div_factor_(final_div_factor) {
  SG_CHECK(max_lrs_.size() == base_lrs_.size(), ValueError, "OneCycleLR: got ", max_lrs_.size(),
           " max_lr values for ", base_lrs_.size(), " parameter groups");
  SG_CHECK(total_steps > 0 && pct_start >= 0 && pct_start <= 1 && div_factor > 0 &&
               final_div_factor > 0,
           ValueError, "OneCycleLR: total_steps ", total_steps, " must be positive, pct_start ",
           pct_start, " in [0, 1], div_factor ", div_factor, " and final_div_factor ",
           final_div_factor, " positive");
  SG_CHECK(cos_ || anneal_strategy == "linear", ValueError, "OneCycleLR: anneal_strategy '",
           anneal_strategy, "' is neither 'cos' nor 'linear'");
  const double up = pct_start * static_cast<double>(total_steps) - 1;
  const double last = static_cast<double>(total_steps) - 1;
  if (three_phase) {
    phases_ = {{up, 0, 1}, {2 * pct_start * static_cast<double>(total_steps) - 2, 1, 0},
               {last, 0, 2}};
  } else {
    phases_ = {{up, 0, 1}, {last, 1, 2}};
  }
  // The cycle starts from max_lr / div_factor whatever the group's lr was (PyTorch).
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    SG_CHECK(max_lrs_[g] >= 0 && std::isfinite(max_lrs_[g]), ValueError, "OneCycleLR: max_lr ",
             max_lrs_[g], " of group ", g, " must be finite and >= 0");
    base_lrs_[g] = max_lrs_[g] / div_factor;
    optimizer.param_groups()[g].set_initial_lr(base_lrs_[g]);
  }
  apply();
}

double OneCycleLR::lr_at(int64_t epoch, size_t g) const {
  SG_CHECK(epoch <= total_steps_, ValueError, "OneCycleLR: tried to step ", epoch,
           " times, but total_steps is ", total_steps_,
           "; make the scheduler with total_steps = epochs * batches per epoch");
  const double lrs[3] = {base_lrs_[g], max_lrs_[g], base_lrs_[g] / final_div_factor_};
  double start_step = 0;
  for (size_t k = 0; k < phases_.size(); ++k) {
    const Phase& p = phases_[k];
    if (epoch <= p.end_step || k + 1 == phases_.size()) {
      const double pct = (epoch - start_step) / (p.end_step - start_step);
      const double from = lrs[p.start], to = lrs[p.end];
      return cos_ ? to + (from - to) / 2 * (std::cos(kPi * pct) + 1) : (to - from) * pct + from;
    }
    start_step = p.end_step;
  }
  return lrs[2];  // not reached: the last phase always returns
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& o)
    : optimizer_(optimizer),
      options_(o),
      min_mode_(o.mode() == "min"),
      rel_(o.threshold_mode() == "rel") {
  SG_CHECK(o.mode() == "min" || o.mode() == "max", ValueError, "ReduceLROnPlateau: mode '",
           o.mode(), "' is neither 'min' nor 'max'");
  SG_CHECK(rel_ || o.threshold_mode() == "abs", ValueError,
           "ReduceLROnPlateau: threshold_mode '", o.threshold_mode(),
           "' is neither 'rel' nor 'abs'");
  SG_CHECK(o.factor() < 1 && o.factor() >= 0 && o.patience() >= 0 && o.cooldown() >= 0 &&
               o.min_lr() >= 0 && o.threshold() >= 0 && o.eps() >= 0,
           ValueError, "ReduceLROnPlateau: factor ", o.factor(),
           " must be in [0, 1), patience ", o.patience(), ", cooldown ", o.cooldown(),
           ", min_lr ", o.min_lr(), ", threshold ", o.threshold(), " and eps ", o.eps(), " >= 0");
  best_ = min_mode_ ? std::numeric_limits<double>::infinity()
                    : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateau::is_better(double a) const {
  const double t = options_.threshold();
  if (min_mode_) return rel_ ? a < best_ * (1 - t) : a < best_ - t;
  return rel_ ? a > best_ * (1 + t) : a > best_ + t;
}

void ReduceLROnPlateau::step(double metric) {
  ++epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;  // a NaN metric is never better
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > options_.patience()) {
    for (OptimizerParamGroup& g : optimizer_.param_groups()) {
      const double old_lr = g.options().get_lr();
      const double new_lr = std::max(old_lr * options_.factor(), options_.min_lr());
      if (old_lr - new_lr > options_.eps()) g.options().set_lr(new_lr);
    }
    cooldown_counter_ = options_.cooldown();
    num_bad_epochs_ = 0;
  }
}

std::vector<double> ReduceLROnPlateau::get_last_lrs() const {
  std::vector<double> out;
  for (const OptimizerParamGroup& g : optimizer_.param_groups()) out.push_back(g.options().get_lr());
  return out;
}

SchedulerState ReduceLROnPlateau::state_dict() const {
  return {{"last_epoch", static_cast<double>(epoch_)},
          {"best", best_},
          {"num_bad_epochs", static_cast<double>(num_bad_epochs_)},
          {"cooldown_counter", static_cast<double>(cooldown_counter_)}};
}

void ReduceLROnPlateau::load_state_dict(const SchedulerState& s) {
  constexpr const char* kOp = "ReduceLROnPlateau";
  const double epoch = state_value(kOp, s, "last_epoch"), best = state_value(kOp, s, "best");
  const double bad = state_value(kOp, s, "num_bad_epochs");
  const double cooldown = state_value(kOp, s, "cooldown_counter");
  for (const double v : {epoch, bad, cooldown}) {
    SG_CHECK(v >= 0 && v == std::floor(v) && v < 9e15, ValueError, kOp,
             "::load_state_dict: the counters must be whole numbers >= 0, got ", v);
  }
  epoch_ = static_cast<int64_t>(epoch);
  best_ = best;
  num_bad_epochs_ = static_cast<int64_t>(bad);
  cooldown_counter_ = static_cast<int64_t>(cooldown);
}

}  // namespace nn
}  // namespace streamgrad

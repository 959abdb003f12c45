#include "nn/optimizer.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

OptimizerParamGroup::OptimizerParamGroup(const OptimizerParamGroup& other)
    : params_(other.params_),
      options_(other.options_ ? other.options_->clone() : nullptr),
      initial_lr_(other.initial_lr_),
      has_initial_lr_(other.has_initial_lr_) {}

OptimizerParamGroup& OptimizerParamGroup::operator=(const OptimizerParamGroup& other) {
  if (this != &other) *this = OptimizerParamGroup(other);
  return *this;
}

OptimizerOptions& OptimizerParamGroup::options() {
  SG_CHECK(options_ != nullptr, ValueError,
           "OptimizerParamGroup::options: the group has no options of its own until an "
           "optimiser takes it (it then gets the optimiser's defaults)");
  return *options_;
}

const OptimizerOptions& OptimizerParamGroup::options() const {
  return const_cast<OptimizerParamGroup*>(this)->options();
}

Optimizer::Optimizer(std::unique_ptr<OptimizerOptions> defaults, const char* name)
    : name_(name), defaults_(std::move(defaults)) {}

void Optimizer::init(const std::vector<OptimizerParamGroup>& groups) {
  check_options(*defaults_, "the default options");
  size_t total = 0;
  for (const OptimizerParamGroup& g : groups) total += g.params().size();
  SG_CHECK(total > 0, ValueError, name_, ": got an empty parameter list");
  for (const OptimizerParamGroup& g : groups) add_param_group(g);
}

void Optimizer::add_param_group(const OptimizerParamGroup& group) {
  const size_t g = groups_.size();
  SG_CHECK(!group.params().empty(), ValueError, name_, ": parameter group ", g,
           " has no parameters");
  if (group.has_options()) {
    check_options(group.options(), absl::StrCat("parameter group ", g, "'s options"));
  }
  std::set<const TensorImpl*> seen;
  for (const Tensor& p : params_) seen.insert(p.impl());
  for (size_t k = 0; k < group.params().size(); ++k) {
    const Tensor& p = group.params()[k];
    const size_t i = params_.size() + k;
    SG_CHECK(p.defined() && p.is_leaf() && p.requires_grad(), ValueError, name_,
             ": parameter ", i, " (group ", g, ") must be a leaf that requires grad, got ",
             p.defined() ? p.describe() : std::string("an undefined tensor"));
    SG_CHECK(seen.insert(p.impl()).second, ValueError, name_, ": parameter ", i, " (group ", g,
             ") appears twice; a parameter may be in one group only, once");
  }
  OptimizerParamGroup added(group);
  if (!added.has_options()) added.options_ = defaults_->clone();
  group_begin_.push_back(params_.size());
  params_.insert(params_.end(), group.params().begin(), group.params().end());
  state_.resize(params_.size());
  groups_.push_back(std::move(added));
}

void Optimizer::check_groups() const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    check_options(groups_[g].options(), absl::StrCat("parameter group ", g, "'s options"));
  }
}

double Optimizer::lr() const { return groups_.at(0).options().get_lr(); }

void Optimizer::set_lr(double lr) {
  SG_CHECK(lr >= 0 && std::isfinite(lr), ValueError, name_, ": learning rate ", lr,
           " must be finite and >= 0");
  for (OptimizerParamGroup& g : groups_) g.options().set_lr(lr);
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
  out.scalars["lr"] = lr();
  out.scalars["groups"] = static_cast<double>(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = absl::StrCat("group.", g, ".");
    out.scalars[prefix + "params"] = static_cast<double>(groups_[g].params().size());
    for (const auto& [name, v] : groups_[g].options().numbers()) out.scalars[prefix + name] = v;
  }
  return out;
}

namespace {

bool is_group_key(const std::string& key) {
  return key == "lr" || key == "groups" || key.rfind("group.", 0) == 0;
}

}  // namespace

void Optimizer::load_state_dict(const OptimizerState& s) {
  // Groups first: their options are validated on copies, applied only once all is checked.
  std::vector<std::unique_ptr<OptimizerOptions>> options;
  const auto groups = s.scalars.find("groups");
  if (groups != s.scalars.end()) {
    SG_CHECK(groups->second == static_cast<double>(groups_.size()), ValueError, name_,
             ": the state holds ", groups->second, " parameter groups but the optimizer has ",
             groups_.size(), "; build the optimizer with the same groups it was saved with");
    for (size_t g = 0; g < groups_.size(); ++g) {
      const std::string prefix = absl::StrCat("group.", g, ".");
      const auto n = s.scalars.find(prefix + "params");
      const double want = static_cast<double>(groups_[g].params().size());
      SG_CHECK(n != s.scalars.end() && n->second == want, ValueError, name_,
               ": parameter group ", g, " holds ", groups_[g].params().size(),
               " parameters but the state's ",
               n == s.scalars.end() ? std::string("does not say how many") : absl::StrCat(n->second),
               "; build the optimizer with the same groups it was saved with");
      std::map<std::string, double> numbers;
      for (const auto& [key, v] : s.scalars) {
        if (key.rfind(prefix, 0) == 0) numbers[key.substr(prefix.size())] = v;
      }
      std::unique_ptr<OptimizerOptions> o = groups_[g].options().clone();
      SG_CHECK(o->set_numbers(numbers), ValueError, name_, ": the state lacks options of ",
               "parameter group ", g, " (expected '", prefix, "<option>' for each of ",
               name_, "'s options)");
      check_options(*o, absl::StrCat("the state's parameter group ", g, " options"));
      options.push_back(std::move(o));
    }
  } else {
    const auto lr = s.scalars.find("lr");
    for (const OptimizerParamGroup& g : groups_) {
      options.push_back(g.options().clone());
      if (lr != s.scalars.end()) options.back()->set_lr(lr->second);
      check_options(*options.back(), "the state's learning rate");
    }
  }
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
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options_ = std::move(options[g]);
  state_ = std::move(loaded);
  scalars_.clear();
  for (const auto& [key, v] : s.scalars) {
    if (!is_group_key(key)) scalars_[key] = v;
  }
}

}  // namespace nn
}  // namespace streamgrad

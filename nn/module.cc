#include "nn/module.h"

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

Tensor Module::forward(const Tensor&) {
  throw Error(absl::StrCat(type_name_, " has no single-input forward; call its own forward"));
}

void Module::check_name(const std::string& name, const char* what) const {
  SG_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError, type_name_,
           ": ", what, " name '", name, "' must be non-empty and contain no '.'");
  auto taken = [&](const auto& list) {
    for (const auto& [n, v] : list) {
      if (n == name) return true;
    }
    return false;
  };
  SG_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), ValueError, type_name_,
           ": ", what, " name '", name, "' is already used in this module");
}

Tensor& Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_name(name, "parameter");
  SG_CHECK(tensor.defined(), ValueError, type_name_, ": parameter '", name, "' is undefined");
  SG_CHECK(tensor.is_leaf(), ValueError, type_name_, ": parameter '", name,
           "' must be a leaf (detach() it first)");
  if (requires_grad) tensor.requires_grad_();
  parameters_.emplace_back(std::move(name), std::move(tensor));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(std::string name, Tensor tensor) {
  check_name(name, "buffer");
  buffers_.emplace_back(std::move(name), std::move(tensor));
  return buffers_.back().second;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_name(name, "module");
  SG_CHECK(module != nullptr, ValueError, type_name_, ": module '", name, "' is null");
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  SG_CHECK(module != nullptr, ValueError, type_name_, ": module '", name, "' is null");
  for (auto& [n, child] : children_) {
    if (n == name) {
      child = std::move(module);
      return;
    }
  }
  throw ValueError(absl::StrCat(type_name_, ": no module '", name, "' to replace"));
}

void Module::unregister_module(const std::string& name) {
  for (auto it = children_.begin(); it != children_.end(); ++it) {
    if (it->first == name) {
      children_.erase(it);
      return;
    }
  }
  throw ValueError(absl::StrCat(type_name_, ": no module '", name, "' to remove"));
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return {children_.begin(), children_.end()};
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out, stack;
  std::set<const Module*> seen{this};
  // An explicit stack, children pushed in reverse: pre-order in registration order, and
  // no recursion however deep the model.
  auto push_children = [&](const std::string& prefix, const Module& m) {
    for (auto it = m.children_.rbegin(); it != m.children_.rend(); ++it) {
      stack.emplace_back(prefix.empty() ? it->first : absl::StrCat(prefix, ".", it->first),
                         it->second);
    }
  };
  push_children("", *this);
  while (!stack.empty()) {
    auto [path, m] = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(m.get()).second) continue;
    push_children(path, *m);
    out.emplace_back(std::move(path), std::move(m));
  }
  return out;
}

template <typename Fn>
void Module::visit_tensors(bool recurse, Fn fn) const {
  std::set<const TensorImpl*> seen;
  auto visit = [&](const std::string& prefix, const Module& m) {
    auto emit = [&](const auto& list, bool is_param) {
      for (const auto& [name, t] : list) {
        if (t.defined() && !seen.insert(t.impl()).second) continue;
        fn(prefix.empty() ? name : absl::StrCat(prefix, ".", name), t, is_param);
      }
    };
    emit(m.parameters_, true);
    emit(m.buffers_, false);
  };
  visit("", *this);
  if (!recurse) return;
  for (const auto& [path, m] : named_modules()) visit(path, *m);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  visit_tensors(recurse, [&](const std::string& n, const Tensor& t, bool param) {
    if (param) out.emplace_back(n, t);
  });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  visit_tensors(recurse, [&](const std::string& n, const Tensor& t, bool param) {
    if (!param && t.defined()) out.emplace_back(n, t);
  });
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  visit_tensors(true, [&](const std::string& n, const Tensor& t, bool) {
    if (t.defined()) out.emplace_back(n, t);
  });
  return out;
}

std::shared_ptr<Module> Module::blank_copy() const {
  throw ValueError(absl::StrCat(
      type_name_, ": blank_copy() is not implemented, so it cannot be cloned or replicated "
      "(DataParallel); override blank_copy() to construct the same module under "
      "nn::init::NoInitGuard"));
}

std::shared_ptr<Module> Module::clone() const {
  std::shared_ptr<Module> copy = blank_copy();
  NoGradGuard no_grad;
  for (const TensorMatch& m : matching_tensors(*this, *copy)) {
    Tensor to = m.to;
    to.requires_grad_(false);  // set_data refuses floating-to-int moves on grad tensors
    to.set_data(streamgrad::clone(m.from.detach()));
    to.requires_grad_(m.from.requires_grad());
  }
  for (const auto& [from, to] : matching_modules(*this, *copy)) {
    to->training_ = from->training_;
    to->copy_host_state(*from);
  }
  return copy;
}

std::vector<TensorMatch> matching_tensors(const Module& from, const Module& to) {
  const NamedTensors a = from.state_dict(), b = to.state_dict();
  const NamedTensors params = to.named_parameters();
  std::set<const TensorImpl*> is_param;
  for (const auto& [n, t] : params) is_param.insert(t.impl());
  SG_CHECK(a.size() == b.size(), ValueError, to.type_name(), ": the copy has ", b.size(),
           " parameters and buffers where the original ", from.type_name(), " has ", a.size(),
           "; blank_copy() must build the same module");
  std::vector<TensorMatch> out;
  for (size_t i = 0; i < a.size(); ++i) {
    SG_CHECK(a[i].first == b[i].first && a[i].second.sizes() == b[i].second.sizes(), ValueError,
             from.type_name(), ": the copy's tensor '", b[i].first, "' ",
             b[i].second.describe(), " does not match the original's '", a[i].first, "' ",
             a[i].second.describe(), "; blank_copy() must build the same module");
    out.push_back({a[i].first, a[i].second, b[i].second, is_param.count(b[i].second.impl()) > 0});
  }
  return out;
}

std::vector<std::pair<const Module*, Module*>> matching_modules(const Module& from, Module& to) {
  const auto a = from.named_modules(), b = to.named_modules();
  SG_CHECK(a.size() == b.size(), ValueError, from.type_name(), ": the copy has ", b.size(),
           " submodules where the original has ", a.size(), "; blank_copy() must build the "
           "same module");
  std::vector<std::pair<const Module*, Module*>> out{{&from, &to}};
  for (size_t i = 0; i < a.size(); ++i) {
    SG_CHECK(a[i].first == b[i].first && a[i].second->type_name() == b[i].second->type_name(),
             ValueError, from.type_name(), ": the copy's submodule '", b[i].first, "' (",
             b[i].second->type_name(), ") does not match the original's '", a[i].first, "' (",
             a[i].second->type_name(), "); blank_copy() must build the same module");
    out.emplace_back(a[i].second.get(), b[i].second.get());
  }
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [path, m] : named_modules()) m->training_ = on;
}

void Module::apply_to_tensors(const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard no_grad;
  std::vector<Tensor> all;
  visit_tensors(true, [&](const std::string&, const Tensor& t, bool) {
    if (t.defined()) all.push_back(t);
  });
  for (const Tensor& t : all) {
    const Tensor moved = convert(t);
    if (!moved.is_same(t)) t.set_data(moved);
  }
}

void Module::to(Device device, bool non_blocking) {
  apply_to_tensors([&](const Tensor& t) {
    if (t.device() == device) return t;
    Tensor moved = streamgrad::to(t.detach(), device, non_blocking);
    if (t.grad().defined()) {
      Tensor g = streamgrad::to(t.grad(), device, non_blocking);
      t.set_data(moved);
      t.set_grad(g);
      return t;
    }
    return moved;
  });
}

void Module::to(DType dtype) {
  apply_to_tensors([&](const Tensor& t) {
    if (!is_floating(t.dtype()) || t.dtype() == dtype) return t;
    return streamgrad::to(t.detach(), dtype);
  });
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      zero_(g);
    }
  }
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  const NamedTensors mine = state_dict();
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) {
    SG_CHECK(given.emplace(name, &t).second, ValueError, "load_state_dict: key '", name,
             "' appears twice in the given state");
  }
  // Validate everything before the first copy: a failed load changes nothing.
  std::vector<std::pair<Tensor, const Tensor*>> copies;
  std::set<std::string> used;
  for (const auto& [name, t] : mine) {
    const auto it = given.find(name);
    if (it == given.end()) {
      SG_CHECK(!strict, ValueError, "load_state_dict: ", type_name_, " expects key '", name,
               "' (", t.describe(), "), which the given state lacks");
      continue;
    }
    const Tensor& src = *it->second;
    SG_CHECK(src.defined() && src.sizes() == t.sizes() && src.dtype() == t.dtype(), ValueError,
             "load_state_dict: key '", name, "' expects ", t.describe(), " but the state holds ",
             src.defined() ? src.describe() : std::string("an undefined tensor"));
    copies.emplace_back(t, &src);
    used.insert(name);
  }
  if (strict) {
    for (const auto& [name, t] : state) {
      SG_CHECK(used.count(name) == 1, ValueError, "load_state_dict: unexpected key '", name,
               "' (", t.describe(), ") for ", type_name_);
    }
  }
  NoGradGuard no_grad;
  for (auto& [dst, src] : copies) {
    Tensor d = dst;
    copy_(d, *src);
  }
  for (const auto& [name, m] : named_modules()) m->state_loaded();
  state_loaded();
}

}  // namespace nn
}  // namespace streamgrad

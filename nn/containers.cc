#include "nn/containers.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

ModuleList::ModuleList(const Modules& modules) : ModuleList() { extend(modules); }

void ModuleList::push_back(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(absl::StrCat(modules_.size()), std::move(module)));
}

void ModuleList::extend(const Modules& modules) {
  for (const auto& m : modules) push_back(m);
}

const std::shared_ptr<Module>& ModuleList::operator[](int64_t index) const {
  const int64_t n = static_cast<int64_t>(modules_.size());
  SG_CHECK(index >= -n && index < n, ValueError, "ModuleList: index ", index,
           " is out of range for a list of ", n, " modules");
  return modules_[static_cast<size_t>(index < 0 ? index + n : index)];
}

std::shared_ptr<Module> ModuleList::blank_copy() const {
  auto copy = std::make_shared<ModuleList>();
  for (const auto& m : modules_) copy->push_back(m->blank_copy());
  return copy;
}

ModuleDict::ModuleDict(const Items& items) : ModuleDict() { update(items); }

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> module) {
  for (auto& [k, m] : items_) {
    if (k == key) {
      replace_module(key, module);
      m = std::move(module);
      return;
    }
  }
  items_.emplace_back(key, register_module(key, std::move(module)));
}

void ModuleDict::update(const Items& items) {
  for (const auto& [key, module] : items) insert(key, module);
}

std::shared_ptr<Module> ModuleDict::pop(const std::string& key) {
  for (auto it = items_.begin(); it != items_.end(); ++it) {
    if (it->first == key) {
      std::shared_ptr<Module> m = it->second;
      unregister_module(key);
      items_.erase(it);
      return m;
    }
  }
  (void)operator[](key);  // throws, naming the keys there are
  return nullptr;
}

void ModuleDict::clear() {
  for (const auto& [key, module] : items_) unregister_module(key);
  items_.clear();
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, m] : items_) {
    if (k == key) return true;
  }
  return false;
}

const std::shared_ptr<Module>& ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, m] : items_) {
    if (k == key) return m;
  }
  throw ValueError(absl::StrCat("ModuleDict: no key '", key, "' (keys: ",
                                items_.empty() ? "none" : absl::StrJoin(keys(), ", "), ")"));
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, m] : items_) out.push_back(k);
  return out;
}

std::vector<std::shared_ptr<Module>> ModuleDict::values() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [k, m] : items_) out.push_back(m);
  return out;
}

std::shared_ptr<Module> ModuleDict::blank_copy() const {
  auto copy = std::make_shared<ModuleDict>();
  for (const auto& [k, m] : items_) copy->insert(k, m->blank_copy());
  return copy;
}

}  // namespace nn
}  // namespace streamgrad

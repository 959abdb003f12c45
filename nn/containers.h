// The containers of torch::nn that hold modules without calling them in a chain:
// ModuleList (children "0", "1", ... in order) and ModuleDict (children under string keys, in
// insertion order). Their parameters, buffers and state dicts are their children's, under
// the index or key, as the reference names them ("blocks.0.attn.weight").
//
//   auto blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
//   for (int i = 0; i < layers; ++i) blocks->push_back(std::make_shared<Block>(dim));
//   for (const auto& b : *blocks) x = b->forward(x);
//   auto heads = std::make_shared<nn::ModuleDict>();
//   heads->insert("cls", std::make_shared<nn::Linear>(dim, 10));
//   Tensor logits = (*heads)["cls"]->forward(x);
//
// forward() on a container is a ValueError (as the reference's ModuleList has none): call
// the children. Thread-safety and failure: as Module; an index out of range or a missing
// key is a ValueError naming it and what there is.
#ifndef STREAMGRAD_NN_CONTAINERS_H_
#define STREAMGRAD_NN_CONTAINERS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace streamgrad {
namespace nn {

class ModuleList : public Module {
 public:
  using Modules = std::vector<std::shared_ptr<Module>>;
  ModuleList() : Module("ModuleList") {}
  explicit ModuleList(const Modules& modules);
  void push_back(std::shared_ptr<Module> module);
  void extend(const Modules& modules);
  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  // Negative indices count from the end, as in the reference.
  const std::shared_ptr<Module>& operator[](int64_t index) const;
  Modules::const_iterator begin() const { return modules_.begin(); }
  Modules::const_iterator end() const { return modules_.end(); }
  std::shared_ptr<Module> blank_copy() const override;

 private:
  Modules modules_;
};

class ModuleDict : public Module {
 public:
  using Items = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;
  ModuleDict() : Module("ModuleDict") {}
  explicit ModuleDict(const Items& items);
  // A key already present gets the new module in its place (the reference's rule).
  void insert(const std::string& key, std::shared_ptr<Module> module);
  void update(const Items& items);
  // Removes the key and returns its module.
  std::shared_ptr<Module> pop(const std::string& key);
  void clear();
  bool contains(const std::string& key) const;
  size_t size() const { return items_.size(); }
  bool is_empty() const { return items_.empty(); }
  const std::shared_ptr<Module>& operator[](const std::string& key) const;
  std::vector<std::string> keys() const;
  std::vector<std::shared_ptr<Module>> values() const;
  const Items& items() const { return items_; }
  std::shared_ptr<Module> blank_copy() const override;

 private:
  Items items_;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_CONTAINERS_H_

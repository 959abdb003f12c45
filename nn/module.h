// nn::Module: the base of every layer and model, as libtorch's torch::nn::Module —
// named parameters, buffers and child modules, train/eval, device and dtype moves,
// zero_grad and state dicts.
//
//   struct Net : nn::Module {
//     Net() : Module("Net") {
//       fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 256));
//       fc2 = register_module("fc2", std::make_shared<nn::Linear>(256, 10));
//     }
//     Tensor forward(const Tensor& x) override { return fc2->forward(relu(fc1->forward(x))); }
//     std::shared_ptr<nn::Linear> fc1, fc2;
//   };
//   auto net = std::make_shared<Net>();
//   net->to(Device("sim:0"));              // parameters move; handles to them stay valid
//   for (auto& [name, p] : net->named_parameters()) ...   // "fc1.weight", "fc1.bias", ...
//   nn::NamedTensors sd = net->state_dict();
//
// Names are dotted paths in registration order. A module shared by two parents is
// listed once (under its first path), so optimisers see each parameter once. to()
// replaces each parameter's and buffer's data in place (Tensor::set_data): optimisers
// built before a move keep working, but their state tensors stay where they were
// (build optimisers after moving the model, as in PyTorch).
//
// Thread-safety: a module is built and changed (register_*, to, train, load_state_dict)
// by one thread; forward may run concurrently on independent inputs when it only reads.
// Failure: ValueError for duplicate or empty names, and from load_state_dict for missing
// or unexpected keys (strict) and wrong shapes or dtypes — naming the key, what was
// expected and what was given — after which the module is unchanged.
#ifndef STREAMGRAD_NN_MODULE_H_
#define STREAMGRAD_NN_MODULE_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// One tensor of a module and the same-named tensor of a copy of it (matching_tensors).
struct TensorMatch {
  std::string name;
  Tensor from, to;
  bool is_parameter;
};

class Module {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The single-input forward most layers have; containers and models override it.
  virtual Tensor forward(const Tensor& input);
  const std::string& type_name() const { return type_name_; }

  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Every module below this one (not this one), depth first, each once.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void to(Device device, bool non_blocking = false);
  void to(DType dtype);  // floating parameters and buffers only, as PyTorch
  void zero_grad(bool set_to_none = true);

  // A module of the same type and configuration with children of its own and tensors of
  // the right shapes but unspecified values: no initialisation runs and no random number
  // is drawn (construct under init::NoInitGuard). clone() and nn::parallel::replicate
  // build on it; every layer of nn/layers.h has one. The default throws ValueError: a
  // model of your own overrides it to be cloned or replicated (as libtorch's Cloneable).
  virtual std::shared_ptr<Module> blank_copy() const;
  // A deep copy, as libtorch's clone(): blank_copy() given this module's parameter and
  // buffer values (copies on the same devices, requires_grad as here, no history), its
  // train/eval flags and its host state.
  std::shared_ptr<Module> clone() const;
  // State a module keeps on the host beside its tensors (BatchNorm2d's batch count),
  // taken from `other`, a module of the same type and configuration: clone() and
  // replicate() give a copy the original's, DataParallel hands the first replica's back.
  virtual void copy_host_state(const Module& other) { (void)other; }

  // Parameters then buffers of each module, depth first in registration order.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& state, bool strict = true);

 protected:
  Tensor& register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  Tensor& register_buffer(std::string name, Tensor tensor);
  // Called on every module after load_state_dict replaced its tensors, for state a
  // module keeps beside them (PyTorch's per-module load hook). The tensors are loaded by
  // then: only a device error may make it throw.
  virtual void state_loaded() {}
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }
  // The child registered as `name` becomes `module` (same place in the order); ValueError
  // when there is none or module is null.
  void replace_module(const std::string& name, std::shared_ptr<Module> module);
  // Forgets the child `name` (ModuleDict::pop); ValueError when there is none.
  void unregister_module(const std::string& name);

 private:
  void add_child(std::string name, std::shared_ptr<Module> module);
  void check_name(const std::string& name, const char* what) const;
  // fn(name, tensor, is_parameter) over this module's and its descendants' tensors.
  template <typename Fn>
  void visit_tensors(bool recurse, Fn fn) const;
  void apply_to_tensors(const std::function<Tensor(const Tensor&)>& convert);

  std::string type_name_;
  bool training_ = true;
  // Deques: register_* hand out references that stay valid as more are added.
  std::deque<std::pair<std::string, Tensor>> parameters_;
  std::deque<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// The parameters and buffers of `from` paired with `to`'s by name, and the modules of
// both paired by path (`from` and `to` first): ValueError when a name, a shape or a
// module type differs, i.e. when `to` is not a copy of `from` (a blank_copy() that does
// not match its module).
std::vector<TensorMatch> matching_tensors(const Module& from, const Module& to);
std::vector<std::pair<const Module*, Module*>> matching_modules(const Module& from, Module& to);

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_MODULE_H_

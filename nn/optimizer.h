// The optimisers' common base, as torch::optim::Optimizer: parameter groups, each with
// its own options, and the state dict that checkpoints store.
//
//   // AdamW with weight decay on the weights and none on biases and norm weights:
//   std::vector<nn::OptimizerParamGroup> groups;
//   groups.emplace_back(decay_params);                                 // the defaults
//   groups.emplace_back(no_decay_params, nn::AdamOptions(1e-3).weight_decay(0));
//   nn::AdamW opt(groups, nn::AdamOptions(1e-3).weight_decay(0.1));
//   opt.param_groups()[1].options().set_lr(1e-4);                      // one group's lr
//
// A group built without options takes a copy of the optimiser's defaults; options given
// must be of the optimiser's type (SGDOptions for SGD...). Parameters are numbered across
// groups in order (group 0's first), as PyTorch's state_dict numbers them; state keys
// are "<param index>.<name>". state_dict() also holds, per group g, "group.<g>.params"
// (its parameter count) and "group.<g>.<option>" for each option (bools as 0 or 1; the
// `foreach` execution choice is not state and is not stored), plus "groups" and, for
// files of older versions, "lr" (group 0's). load_state_dict restores every group's
// options; a state without "groups" (an older checkpoint) sets every group's lr to "lr".
//
// Thread-safety: one thread uses an optimiser. Failure: ValueError for an empty parameter
// list or group, a parameter that is not a leaf requiring grad or appears twice (in any
// group), options of another optimiser's type or out of range (checked at construction,
// add_param_group and every step, since param_groups() lets callers change them), and for
// load_state_dict states whose groups (count, sizes, options), keys, shapes or dtypes do
// not match (the optimiser is then unchanged).
#ifndef STREAMGRAD_NN_OPTIMIZER_H_
#define STREAMGRAD_NN_OPTIMIZER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/options.h"

namespace streamgrad {
namespace nn {

// Options every optimiser's options struct offers (libtorch's OptimizerOptions).
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // The options as named numbers, for state dicts (bools 0 or 1; `foreach` left out).
  virtual std::map<std::string, double> numbers() const = 0;
  // Sets each option from `numbers`; false, changing nothing, unless every one is there.
  virtual bool set_numbers(const std::map<std::string, double>& numbers) = 0;
};

class OptimizerParamGroup {
 public:
  explicit OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}
  OptimizerParamGroup(std::vector<Tensor> params, const OptimizerOptions& options)
      : params_(std::move(params)), options_(options.clone()) {}
  OptimizerParamGroup(const OptimizerParamGroup& other);
  OptimizerParamGroup& operator=(const OptimizerParamGroup& other);
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) = default;

  bool has_options() const { return options_ != nullptr; }
  // Throws ValueError when the group has no options (one not yet given to an optimiser).
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  const std::vector<Tensor>& params() const { return params_; }

  // The lr schedulers start from (PyTorch's group["initial_lr"]): set by the first
  // scheduler made for the optimiser, so a second one (SequentialLR's) starts from the
  // same lr, not from what the first already changed.
  bool has_initial_lr() const { return has_initial_lr_; }
  double initial_lr() const { return initial_lr_; }
  void set_initial_lr(double lr) {
    initial_lr_ = lr;
    has_initial_lr_ = true;
  }

 private:
  friend class Optimizer;
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
  double initial_lr_ = 0;
  bool has_initial_lr_ = false;
};

struct OptimizerState {
  NamedTensors tensors;
  std::map<std::string, double> scalars;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad(bool set_to_none = true);

  // A group without options gets the defaults'. Its parameters are numbered after those
  // already held.
  void add_param_group(const OptimizerParamGroup& group);
  std::vector<OptimizerParamGroup>& param_groups() { return groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const { return groups_; }
  const OptimizerOptions& defaults() const { return *defaults_; }

  // Group 0's learning rate; set_lr sets every group's.
  double lr() const;
  void set_lr(double lr);
  // Every group's parameters, in order.
  const std::vector<Tensor>& params() const { return params_; }

  OptimizerState state_dict() const;
  void load_state_dict(const OptimizerState& state);

 protected:
  Optimizer(std::unique_ptr<OptimizerOptions> defaults, const char* name);
  // For the derived constructor, once check_options can be called: validates the
  // defaults and adds the groups.
  void init(const std::vector<OptimizerParamGroup>& groups);
  // Throws ValueError naming `where` unless `o` is this optimiser's options type and in range.
  virtual void check_options(const OptimizerOptions& o, const std::string& where) const = 0;
  // Checks every group's options (step() calls it first).
  void check_groups() const;
  // Index of group g's first parameter in params_.
  size_t group_begin(size_t g) const { return group_begin_[g]; }

  // The state tensor `name` of parameter i (undefined until created).
  Tensor& state(size_t i, const std::string& name);
  std::vector<Tensor> params_;
  const char* name_;
  std::vector<std::map<std::string, Tensor>> state_;  // per parameter
  std::map<std::string, double> scalars_;             // step counts and the like

 private:
  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<OptimizerParamGroup> groups_;
  std::vector<size_t> group_begin_;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_OPTIMIZER_H_
